package bench

import (
	"fmt"
	"io"
	"time"
)

// Added is a latency of network limited minus the same of unrestricted,
// at each percentile (a difference of percentiles, not a percentile of
// differences), in ms.
type Added struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
}

// EgressRow is one line of the egress bench: one measure on one backend,
// in a box of network unrestricted and one of network limited.
type EgressRow struct {
	Scenario string `json:"scenario"`
	Backend  string `json:"backend"`
	// Unit is "ms" for a latency (Unrestricted, Limited and Added set) or
	// "MB/s" for a download (the rates, the median of N, and Bytes set).
	Unit string `json:"unit"`
	// N is the number of samples (or downloads) in each mode.
	N            int      `json:"n"`
	Unrestricted *Latency `json:"unrestricted,omitempty"`
	Limited      *Latency `json:"limited,omitempty"`
	Added        *Added   `json:"added,omitempty"`
	// Bytes is the size of the download.
	Bytes            int64   `json:"bytes,omitempty"`
	UnrestrictedRate float64 `json:"unrestricted_mb_s,omitempty"`
	LimitedRate      float64 `json:"limited_mb_s,omitempty"`
	// Ratio is limited over unrestricted: of the p50 latency, or of the
	// rate (0: not measured).
	Ratio float64 `json:"ratio"`
	// Credential, CredentialAdded and CredentialRate are the same in a
	// box of network limited with a secret for the upstream's name (its
	// requests relayed one by one, HTTPS terminated by the egress CA,
	// responses scrubbed); CredentialRatio is over unrestricted. Unset for
	// lookups.
	Credential      *Latency `json:"credential,omitempty"`
	CredentialAdded *Added   `json:"credential_added,omitempty"`
	CredentialRate  float64  `json:"credential_mb_s,omitempty"`
	CredentialRatio float64  `json:"credential_ratio,omitempty"`
}

// EgressReport is the outcome of `astrabox bench egress`.
type EgressReport struct {
	Date    time.Time `json:"date"`
	Machine string    `json:"machine"`
	// Settings echoes the configuration the figures come from.
	Settings string      `json:"settings"`
	Rows     []EgressRow `json:"rows"`
	// Notes say what went through the proxy and what the run left.
	Notes []string `json:"notes,omitempty"`
}

// WriteTable prints the report as one Markdown table, the three boxes side
// by side, with its notes below.
func (r EgressReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\nastrabox bench egress (%s; %s; %s)\n\n", r.Date.Format("2006-01-02 15:04 MST"), r.Machine, r.Settings)
	rows := [][]string{{"scenario", "backend", "n", "unrestricted p50 / p90 / p99", "limited p50 / p90 / p99",
		"added by the proxy p50 / p90 / p99", "limited / unrestricted",
		"limited with a credential p50 / p90 / p99", "added with a credential p50 / p90 / p99", "with a credential / unrestricted"}}
	lat := func(l *Latency) string { return fmt.Sprintf("%.3f / %.3f / %.3f ms", l.P50, l.P90, l.P99) }
	added := func(a *Added) string { return fmt.Sprintf("%+.3f / %+.3f / %+.3f ms", a.P50, a.P90, a.P99) }
	ratio := func(v float64) string {
		if v > 0 {
			return fmt.Sprintf("%.2fx", v)
		}
		return "-"
	}
	for _, row := range r.Rows {
		cells := []string{row.Scenario, row.Backend, fmt.Sprint(row.N), "-", "-", "-", ratio(row.Ratio), "-", "-", ratio(row.CredentialRatio)}
		switch {
		case row.Unrestricted != nil && row.Limited != nil && row.Added != nil:
			cells[3], cells[4], cells[5] = lat(row.Unrestricted), lat(row.Limited), added(row.Added)
			if row.Credential != nil && row.CredentialAdded != nil {
				cells[7], cells[8] = lat(row.Credential), added(row.CredentialAdded)
			}
		case row.Bytes > 0:
			cells[2] = fmt.Sprintf("%d × %s", row.N, sizeString(row.Bytes))
			cells[3], cells[4] = fmt.Sprintf("%.1f MB/s", row.UnrestrictedRate), fmt.Sprintf("%.1f MB/s", row.LimitedRate)
			if row.CredentialRate > 0 {
				cells[7] = fmt.Sprintf("%.1f MB/s", row.CredentialRate)
			}
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
func (r EgressReport) WriteJSON(path string) error {
	return writeJSON(path, r)
}
