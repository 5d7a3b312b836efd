package idempotency

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// memStore is a Store in memory.
type memStore struct {
	mu   sync.Mutex
	recs map[string]store.Idempotency
}

func (m *memStore) PutIdempotency(_ context.Context, rec store.Idempotency) (store.Idempotency, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if got, ok := m.recs[rec.Key]; ok {
		return got, true, nil
	}
	m.recs[rec.Key] = rec
	return rec, false, nil
}

func (m *memStore) CompleteIdempotency(_ context.Context, rec store.Idempotency) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[rec.Key] = rec
	return nil
}

func (m *memStore) DeleteIdempotency(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, key)
	return nil
}

// TestReservationOfAGoneProcess: a key reserved by a request that never
// answered is taken over as soon as the process that reserved it is known
// gone (this replica restarted; another that does not answer, or answers
// as another start), and not while it lives.
func TestReservationOfAGoneProcess(t *testing.T) {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderBoot, "peerboot")
	}))
	defer peer.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	tests := []struct {
		name   string
		holder string
		age    time.Duration
		want   int
	}{
		{"this process, still running", "http://me#now", 0, http.StatusConflict},
		{"this replica before a restart", "http://me#before", 0, http.StatusCreated},
		{"a live peer", peer.URL + "#peerboot", 0, http.StatusConflict},
		{"a peer started again since", peer.URL + "#oldboot", 0, http.StatusCreated},
		{"a peer that does not answer", deadURL + "#boot", 0, http.StatusCreated},
		{"no holder, fresh", "", 0, http.StatusConflict},
		{"no holder, stale", "", staleReservation + time.Minute, http.StatusCreated},
		{"a live peer, stale", peer.URL + "#peerboot", staleReservation + time.Minute, http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &memStore{recs: map[string]store.Idempotency{}}
			k := &Keeper{Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Self: "http://me#now",
				Probe: ProbeHealth(&http.Client{Timeout: time.Second})}
			body := []byte(`{"a":1}`)
			// The reservation a request that never answered left.
			k2 := *k
			k2.Self = tt.holder
			ran := 0
			first := httptest.NewRequest(http.MethodPost, "/x", nil)
			first.Header.Set(Header, "key-1")
			held := make(chan struct{})
			go k2.Serve(httptest.NewRecorder(), first, "create", body, 0, func() (int, any, error) {
				st.mu.Lock()
				rec := st.recs["create:key-1"]
				rec.CreatedAt = rec.CreatedAt.Add(-tt.age)
				st.recs["create:key-1"] = rec
				st.mu.Unlock()
				close(held)
				<-t.Context().Done() // never answers while the test runs
				return 0, nil, errors.New("gone")
			})
			<-held
			r := httptest.NewRequest(http.MethodPost, "/x", nil)
			r.Header.Set(Header, "key-1")
			w := httptest.NewRecorder()
			k.Serve(w, r, "create", body, 0, func() (int, any, error) { ran++; return http.StatusCreated, map[string]int{"n": ran}, nil })
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, strings.TrimSpace(w.Body.String()))
			}
			if (ran == 1) != (tt.want == http.StatusCreated) {
				t.Fatalf("ran %d times", ran)
			}
		})
	}
}

// TestProbeHealth: the boot a healthz answer names; an error when none
// answers.
func TestProbeHealth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set(HeaderBoot, "b1")
	}))
	probe := ProbeHealth(srv.Client())
	if got, err := probe(t.Context(), srv.URL+"/"); err != nil || got != "b1" {
		t.Fatalf("probe = %q, %v", got, err)
	}
	srv.Close()
	if _, err := probe(t.Context(), srv.URL); err == nil {
		t.Fatal("a closed server answered")
	}
}
