// Package metrics keeps the process's counters and histograms that
// /metrics reports beside what it reads from the store at scrape time.
// They are written by hand in the Prometheus text format (no client
// library): a family is declared once here, as a package variable, and
// the packages that do the work add to it. Label values must come from
// small fixed sets (route patterns, status codes, outcomes), never ids.
package metrics

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LatencyBuckets are the histograms' upper bounds, in seconds.
var LatencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// The families, in the order Write writes them.
var (
	HTTPRequests = NewCounter("astrabox_http_requests_total",
		"HTTP requests answered, by route (the ServeMux pattern) and status code.", "route", "code")
	HTTPDuration = NewHistogram("astrabox_http_request_duration_seconds",
		"Time to answer an HTTP request, by route (the ServeMux pattern).", LatencyBuckets, "route")
	Replies = NewCounter("astrabox_replies_total",
		"Session replies ended, by outcome (completed, interrupted, failed).", "outcome")
	ModelRequests = NewCounter("astrabox_model_requests_total",
		"Model requests from boxes through the model path, by the status code returned to the box.", "code")
	ModelDuration = NewHistogram("astrabox_model_request_duration_seconds",
		"Time from a box's model request to the end of its answer (streamed answers included).", LatencyBuckets)
	LogAppends = NewCounter("astrabox_log_appends_total",
		"Appends to Session logs, by result (ok, error).", "result")
	LogEntries = NewCounter("astrabox_log_entries_appended_total",
		"Entries appended to Session logs.")
	ReconcilePasses = NewCounter("astrabox_reconcile_passes_total",
		"Reconciler passes this replica ran, by backend.", "backend")
	ReconcileDuration = NewHistogram("astrabox_reconcile_pass_duration_seconds",
		"Time of a reconciler pass, by backend.", LatencyBuckets, "backend")
	ReconcileActions = NewCounter("astrabox_reconcile_actions_total",
		"What reconciler passes did, by backend and action (ttl_expiry, idle_timeout, died, orphan_removed...).", "backend", "action")
	EgressDecisions = NewCounter("astrabox_egress_decisions_total",
		"Egress proxy decisions on boxes' connections and lookups, by kind (tcp, tls, dns) and decision (allowed, refused).", "kind", "decision")
)

var (
	regMu    sync.Mutex
	families []family
)

type family interface{ write(io.Writer) }

func register(f family) {
	regMu.Lock()
	defer regMu.Unlock()
	families = append(families, f)
}

// Write writes every family in the Prometheus text format.
func Write(w io.Writer) {
	regMu.Lock()
	fs := append([]family(nil), families...)
	regMu.Unlock()
	for _, f := range fs {
		f.write(w)
	}
}

// Counter is a counter family with fixed label names.
type Counter struct {
	name, help string
	labels     []string
	mu         sync.Mutex
	vals       map[string]float64 // by joined label values
}

// NewCounter declares and registers a counter family.
func NewCounter(name, help string, labels ...string) *Counter {
	c := &Counter{name: name, help: help, labels: labels, vals: map[string]float64{}}
	register(c)
	return c
}

// Inc adds 1 to the series with the label values given (one per label).
func (c *Counter) Inc(values ...string) { c.Add(1, values...) }

// Add adds v to the series with the label values given.
func (c *Counter) Add(v float64, values ...string) {
	k := key(c.labels, values)
	c.mu.Lock()
	c.vals[k] += v
	c.mu.Unlock()
}

// Value returns a series' value (for tests).
func (c *Counter) Value(values ...string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.vals[key(c.labels, values)]
}

func (c *Counter) write(w io.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", c.name, c.help, c.name)
	if len(c.labels) == 0 {
		fmt.Fprintf(w, "%s %s\n", c.name, num(c.vals[""]))
		return
	}
	for _, k := range sortedKeys(c.vals) {
		fmt.Fprintf(w, "%s{%s} %s\n", c.name, labelText(c.labels, k, ""), num(c.vals[k]))
	}
}

// Histogram is a cumulative histogram family with fixed label names.
type Histogram struct {
	name, help string
	bounds     []float64
	labels     []string
	mu         sync.Mutex
	series     map[string]*hseries
}

type hseries struct {
	buckets []uint64
	sum     float64
	count   uint64
}

// NewHistogram declares and registers a histogram family.
func NewHistogram(name, help string, bounds []float64, labels ...string) *Histogram {
	h := &Histogram{name: name, help: help, bounds: bounds, labels: labels, series: map[string]*hseries{}}
	register(h)
	return h
}

// Observe records d in the series with the label values given.
func (h *Histogram) Observe(d time.Duration, values ...string) {
	v := d.Seconds()
	k := key(h.labels, values)
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[k]
	if s == nil {
		s = &hseries{buckets: make([]uint64, len(h.bounds))}
		h.series[k] = s
	}
	for i, b := range h.bounds {
		if v <= b {
			s.buckets[i]++
		}
	}
	s.sum += v
	s.count++
}

// Count returns a series' number of observations (for tests).
func (h *Histogram) Count(values ...string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.series[key(h.labels, values)]; s != nil {
		return s.count
	}
	return 0
}

func (h *Histogram) write(w io.Writer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", h.name, h.help, h.name)
	for _, k := range sortedKeys(h.series) {
		s := h.series[k]
		for i, b := range h.bounds {
			fmt.Fprintf(w, "%s_bucket{%s} %d\n", h.name, labelText(h.labels, k, strconv.FormatFloat(b, 'g', -1, 64)), s.buckets[i])
		}
		fmt.Fprintf(w, "%s_bucket{%s} %d\n", h.name, labelText(h.labels, k, "+Inf"), s.count)
		braces := ""
		if len(h.labels) > 0 {
			braces = "{" + labelText(h.labels, k, "") + "}"
		}
		fmt.Fprintf(w, "%s_sum%s %s\n%s_count%s %d\n", h.name, braces, num(s.sum), h.name, braces, s.count)
	}
}

// key joins label values; a missing value is "", an extra one dropped.
func key(labels, values []string) string {
	vs := make([]string, len(labels))
	copy(vs, values)
	return strings.Join(vs, "\x00")
}

// labelText renders the label pairs of key k, then le if not "".
func labelText(labels []string, k, le string) string {
	var b strings.Builder
	if len(labels) > 0 {
		for i, v := range strings.Split(k, "\x00") {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%s", labels[i], quote(v))
		}
	}
	if le != "" {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "le=%q", le)
	}
	return b.String()
}

// quote escapes a label value as the text format wants (\\, \" and \n).
func quote(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
