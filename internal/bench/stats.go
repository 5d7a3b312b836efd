// Package bench measures AstraBox and prints the figures as tables (and
// JSON), each side by side with the alternative measured in the same run.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// Latency summarises a set of durations.
type Latency struct {
	N   int     `json:"n"`
	Min float64 `json:"min_ms"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// summarize computes percentiles (nearest rank) of ds.
func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	pct := func(p float64) float64 {
		i := int(p*float64(len(s))+0.5) - 1
		i = max(0, min(i, len(s)-1))
		return ms(s[i])
	}
	return Latency{N: len(s), Min: ms(s[0]), P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Row is one line of a result table: a measured quantity for AstraBox and
// for the alternative it is compared with.
type Row struct {
	Scenario    string   `json:"scenario"`
	Unit        string   `json:"unit"`
	Subject     float64  `json:"astrabox"`
	Alternative float64  `json:"alternative"`
	AltName     string   `json:"alternative_name"`
	Latency     *Latency `json:"latency,omitempty"`
	AltLatency  *Latency `json:"alternative_latency,omitempty"`
}

// Report is a titled set of rows.
type Report struct {
	Title string    `json:"title"`
	Date  time.Time `json:"date"`
	Rows  []Row     `json:"rows"`
}

// WriteTable prints r as an aligned text table (Markdown-compatible).
func (r Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\n%s (%s)\n\n", r.Title, r.Date.Format("2006-01-02 15:04 MST"))
	header := []string{"scenario", "astrabox", "alternative", "ratio", "astrabox p50 / p90 / p99 / max (ms)"}
	rows := [][]string{header}
	for _, row := range r.Rows {
		ratio := "-"
		if row.Alternative > 0 {
			ratio = fmt.Sprintf("%.2fx", row.Subject/row.Alternative)
		}
		lat := "-"
		if l := row.Latency; l != nil {
			lat = fmt.Sprintf("%.2f / %.2f / %.2f / %.2f", l.P50, l.P90, l.P99, l.Max)
		}
		rows = append(rows, []string{
			row.Scenario,
			fmt.Sprintf("%.2f %s", row.Subject, row.Unit),
			fmt.Sprintf("%.2f %s (%s)", row.Alternative, row.Unit, row.AltName),
			ratio, lat,
		})
	}
	writeMarkdown(w, rows)
}

// WriteJSON writes r to path as indented JSON.
func (r Report) WriteJSON(path string) error {
	return writeJSON(path, r)
}

// writeJSON writes v to path as indented JSON.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
