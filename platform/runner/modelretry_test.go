package runner

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRetryPause(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	hdr := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	tests := []struct {
		name   string
		n      int
		h      http.Header
		want   time.Duration
		wantOK bool
	}{
		{"no answer, first", 1, nil, 500 * time.Millisecond, true},
		{"no answer, third", 3, nil, 2 * time.Second, true},
		{"growth is capped", 10, nil, maxRetryPause, true},
		{"seconds", 1, hdr("7"), 7 * time.Second, true},
		{"a date", 1, hdr(now.Add(3 * time.Second).Format(http.TimeFormat)), 3 * time.Second, true},
		{"a date passed: the growing pause", 2, hdr(now.Add(-time.Minute).Format(http.TimeFormat)), time.Second, true},
		{"zero: the growing pause", 1, hdr("0"), 500 * time.Millisecond, true},
		{"garbage: the growing pause", 1, hdr("soon"), 500 * time.Millisecond, true},
		{"negative: the growing pause", 1, hdr("-5"), 500 * time.Millisecond, true},
		{"too long: not retried", 1, hdr("3600"), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := retryPause(tt.n, tt.h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("retryPause(%d, %v) = %v, %v; want %v, %v", tt.n, tt.h, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRetryableStatus(t *testing.T) {
	for code, want := range map[int]bool{200: false, 400: false, 401: false, 404: false, 408: false, 413: false,
		429: true, 500: true, 502: true, 503: true, 504: true, 529: true, 501: false} {
		if got := retryableStatus(code); got != want {
			t.Errorf("retryableStatus(%d) = %v, want %v", code, got, want)
		}
	}
}

// takeNotes returns the notes mp has queued.
func takeNotes(mp *modelProxy) []modelNote {
	var out []modelNote
	for {
		select {
		case n := <-mp.notes:
			out = append(out, n)
		default:
			return out
		}
	}
}

// TestModelPathRetries: a request that failed before its answer began is
// sent again, the same, after the pause asked for, up to the profile's
// retries; what the endpoint said goes to the Session's log as notes; an
// answer that is not a hiccup, or one after the retries, goes back as it
// is.
func TestModelPathRetries(t *testing.T) {
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	answer := func(code int, hdr ...string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			for i := 0; i+1 < len(hdr); i += 2 {
				w.Header().Set(hdr[i], hdr[i+1])
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":{"message":"answer %d for %s"}}`, code, testModelKey)
		}
	}
	reset := func(w http.ResponseWriter) { // the connection dropped before any answer
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}
	ok := func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK); io.WriteString(w, "data: [DONE]\n\n") }
	tests := []struct {
		name      string
		retries   int
		answers   []func(http.ResponseWriter)
		wantCode  int
		wantNotes []string // note types, with the status or pause that matters
		wantPause []time.Duration
	}{
		{"429 then the answer", 3, []func(http.ResponseWriter){answer(429, "Retry-After", "2"), ok}, 200,
			[]string{"model.retry 429"}, []time.Duration{2 * time.Second}},
		{"a reset then the answer", 3, []func(http.ResponseWriter){reset, ok}, 200,
			[]string{"model.retry 0"}, []time.Duration{firstRetryPause}},
		{"503 past the retries", 2, []func(http.ResponseWriter){answer(503), answer(503), answer(503)}, 503,
			[]string{"model.retry 503", "model.retry 503", "model.failed 503"}, []time.Duration{firstRetryPause, 2 * firstRetryPause}},
		{"400 is not a hiccup", 3, []func(http.ResponseWriter){answer(400)}, 400, []string{"model.failed 400"}, nil},
		{"no retries", 0, []func(http.ResponseWriter){answer(429)}, 429, []string{"model.failed 429"}, nil},
		{"a pause too long is not waited", 3, []func(http.ResponseWriter){answer(429, "Retry-After", "3600")}, 429,
			[]string{"model.failed 429"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []string
			mp, _ := newTestModelProxy(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				n := len(bodies)
				bodies = append(bodies, string(b))
				mu.Unlock()
				tt.answers[min(n, len(tt.answers)-1)](w)
			})
			mp.retries = tt.retries
			var pauses []time.Duration
			mp.pause = func(try int, h http.Header, now time.Time) (time.Duration, bool) {
				d, ok := retryPause(try, h, now)
				if ok {
					pauses = append(pauses, d)
				}
				return d / 1000, ok // the pauses asked for, not waited in full
			}
			rec := boxRequest(mp, http.MethodPost, "/v1/chat/completions", body)
			if rec.Code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantCode, rec.Body)
			}
			if strings.Contains(rec.Body.String(), testModelKey) {
				t.Fatalf("the key reached the box: %s", rec.Body)
			}
			for i, b := range bodies {
				if b != body {
					t.Fatalf("try %d sent %q, want the request's body", i+1, b)
				}
			}
			var notes []string
			for _, n := range takeNotes(mp) {
				status, _ := n.fields["status"].(int)
				notes = append(notes, fmt.Sprintf("%s %d", n.typ, status))
				if msg, _ := n.fields["message"].(string); strings.Contains(msg, testModelKey) {
					t.Fatalf("a note holds the key: %v", n.fields)
				}
			}
			if !slices.Equal(notes, tt.wantNotes) {
				t.Errorf("notes %v, want %v", notes, tt.wantNotes)
			}
			if len(pauses) > len(tt.wantPause) {
				pauses = pauses[:len(tt.wantPause)] // the last try's pause is asked, not taken
			}
			if !slices.Equal(pauses, tt.wantPause) {
				t.Errorf("pauses %v, want %v", pauses, tt.wantPause)
			}
		})
	}
}
