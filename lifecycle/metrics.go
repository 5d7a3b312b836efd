package lifecycle

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// histogram is a Prometheus-style cumulative histogram per label value.
type histogram struct {
	mu      sync.Mutex
	bounds  []float64
	buckets map[string][]uint64
	sum     map[string]float64
	count   map[string]uint64
}

var createSeconds = &histogram{
	bounds:  []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	buckets: map[string][]uint64{}, sum: map[string]float64{}, count: map[string]uint64{},
}

func (h *histogram) observe(label string, d time.Duration) {
	v := d.Seconds()
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.buckets[label]
	if b == nil {
		b = make([]uint64, len(h.bounds))
		h.buckets[label] = b
	}
	for i, bound := range h.bounds {
		if v <= bound {
			b[i]++
		}
	}
	h.sum[label] += v
	h.count[label]++
}

func (h *histogram) write(w io.Writer, name, help, label string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	labels := make([]string, 0, len(h.count))
	for l := range h.count {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		for i, bound := range h.bounds {
			fmt.Fprintf(w, "%s_bucket{%s=%q,le=\"%g\"} %d\n", name, label, l, bound, h.buckets[l][i])
		}
		fmt.Fprintf(w, "%s_bucket{%s=%q,le=\"+Inf\"} %d\n", name, label, l, h.count[l])
		fmt.Fprintf(w, "%s_sum{%s=%q} %g\n%s_count{%s=%q} %d\n", name, label, l, h.sum[l], name, label, l, h.count[l])
	}
}

// WriteMetrics writes the service's metrics in the Prometheus text format:
// sandboxes by state and backend (from the store) and create latency.
func (s *Service) WriteMetrics(ctx context.Context, w io.Writer) error {
	recs, _, err := s.cfg.Store.ListSandboxes(ctx, store.ListFilter{})
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	counts := map[[2]string]int{}
	for _, r := range recs {
		counts[[2]string{r.Backend, string(r.State)}]++
	}
	fmt.Fprintf(w, "# HELP astrabox_sandboxes Sandboxes by backend and state.\n# TYPE astrabox_sandboxes gauge\n")
	for _, b := range s.backendNames() {
		for _, st := range sandbox.States {
			fmt.Fprintf(w, "astrabox_sandboxes{backend=%q,state=%q} %d\n", b, st, counts[[2]string{b, string(st)}])
		}
	}
	createSeconds.write(w, "astrabox_sandbox_create_seconds", "Time from create request to a running sandbox.", "backend")
	return s.writePoolMetrics(ctx, w)
}
