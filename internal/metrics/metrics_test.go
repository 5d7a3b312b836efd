package metrics

import (
	"strings"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	c := &Counter{name: "x_total", help: "X.", labels: []string{"route", "code"}, vals: map[string]float64{}}
	c.Inc("GET /a/{id}", "200")
	c.Add(2, "GET /a/{id}", "200")
	c.Inc(`we"ird`, "500")
	h := &Histogram{name: "x_seconds", help: "T.", bounds: []float64{0.1, 1}, series: map[string]*hseries{}}
	h.Observe(500 * time.Millisecond)
	n := &Counter{name: "n_total", help: "N.", vals: map[string]float64{}}
	var b strings.Builder
	c.write(&b)
	h.write(&b)
	n.write(&b)
	want := `# HELP x_total X.
# TYPE x_total counter
x_total{route="GET /a/{id}",code="200"} 3
x_total{route="we\"ird",code="500"} 1
# HELP x_seconds T.
# TYPE x_seconds histogram
x_seconds_bucket{le="0.1"} 0
x_seconds_bucket{le="1"} 1
x_seconds_bucket{le="+Inf"} 1
x_seconds_sum 0.5
x_seconds_count 1
# HELP n_total N.
# TYPE n_total counter
n_total 0
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
