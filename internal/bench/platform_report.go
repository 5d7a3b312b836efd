package bench

import (
	"fmt"
	"io"
	"time"
)

// Series summarises one set of samples of the platform bench.
type Series struct {
	// Name says what was measured ("through AstraBox", "fake model
	// direct", "1 follower", ...).
	Name string  `json:"name"`
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
}

// seriesOf summarises ds (nearest-rank percentiles, as summarize).
func seriesOf(name string, ds []time.Duration) Series {
	l := summarize(ds)
	s := Series{Name: name, N: l.N, P50: l.P50, P99: l.P99}
	if len(ds) > 0 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		s.Mean = ms(sum / time.Duration(len(ds)))
	}
	return s
}

// PlatformRow is one line of the platform bench: a latency measured
// through AstraBox, the reference measured alongside it in the same run
// (when there is one), and, for log appends, the rate reached.
type PlatformRow struct {
	Scenario string `json:"scenario"`
	// Backend is the sandbox backend, or the store of the append rows.
	Backend   string  `json:"backend"`
	Subject   Series  `json:"astrabox"`
	Reference *Series `json:"reference,omitempty"`
	// AddedP50 and AddedP99 are Subject's percentiles minus Reference's
	// (a difference of percentiles, not a percentile of differences).
	AddedP50 *float64 `json:"added_p50_ms,omitempty"`
	AddedP99 *float64 `json:"added_p99_ms,omitempty"`
	// Rate is entries appended per second (append rows only).
	Rate float64 `json:"frames_per_s,omitempty"`
	// Aim is the figure the project aims at and whether this run met it;
	// it is reported, never enforced.
	Aim  string `json:"aim,omitempty"`
	Note string `json:"note,omitempty"`
}

// withReference sets r's reference and the differences to it.
func (r PlatformRow) withReference(ref Series) PlatformRow {
	p50, p99 := r.Subject.P50-ref.P50, r.Subject.P99-ref.P99
	r.Reference, r.AddedP50, r.AddedP99 = &ref, &p50, &p99
	return r
}

// atMost is an aim "≤ limit unit what" with its verdict for value.
func atMost(limit float64, unit, what string, value float64) string {
	return fmt.Sprintf("≤ %g %s %s: %s", limit, unit, what, verdict(value <= limit))
}

// atLeast is an aim "≥ limit unit" with its verdict for value.
func atLeast(limit float64, unit string, value float64) string {
	return fmt.Sprintf("≥ %s %s: %s", thousands(limit), unit, verdict(value >= limit))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// thousands formats a non-negative number rounded to an integer with
// comma separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// PlatformReport is the outcome of `astrabox bench platform` (and of
// `astrabox bench replicas`, in the same form).
type PlatformReport struct {
	// Title heads the table (default "astrabox bench platform").
	Title   string    `json:"title,omitempty"`
	Date    time.Time `json:"date"`
	Machine string    `json:"machine"`
	// Settings echoes the configuration the figures come from.
	Settings string        `json:"settings"`
	Rows     []PlatformRow `json:"rows"`
	// Notes explain rows left out (e.g. no PostgreSQL server given).
	Notes []string `json:"notes,omitempty"`
}

// WriteTable prints the report as one Markdown table (times in ms) with
// its notes below.
func (r PlatformReport) WriteTable(w io.Writer) {
	title := r.Title
	if title == "" {
		title = "astrabox bench platform"
	}
	fmt.Fprintf(w, "\n%s (%s; %s; %s)\n\n", title, r.Date.Format("2006-01-02 15:04 MST"), r.Machine, r.Settings)
	rows := [][]string{{"scenario", "backend", "n", "p50", "p99", "mean", "reference", "ref p50 / p99 / mean",
		"added p50 / p99", "frames/s", "aim", "notes"}}
	f := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	for _, row := range r.Rows {
		s := row.Subject
		cells := []string{row.Scenario, row.Backend, fmt.Sprint(s.N), f(s.P50), f(s.P99), f(s.Mean), "-", "-", "-", "-", row.Aim, row.Note}
		if ref := row.Reference; ref != nil {
			cells[6] = fmt.Sprintf("%s (n %d)", ref.Name, ref.N)
			cells[7] = fmt.Sprintf("%s / %s / %s", f(ref.P50), f(ref.P99), f(ref.Mean))
		}
		if row.AddedP50 != nil && row.AddedP99 != nil {
			cells[8] = fmt.Sprintf("%s / %s", f(*row.AddedP50), f(*row.AddedP99))
		}
		if row.Rate > 0 {
			cells[9] = thousands(row.Rate)
		}
		if cells[10] == "" {
			cells[10] = "-"
		}
		rows = append(rows, cells)
	}
	writeMarkdown(w, rows)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\n- %s", n)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
	}
}

// WriteJSON writes the report to path as indented JSON.
func (r PlatformReport) WriteJSON(path string) error {
	return writeJSON(path, r)
}
