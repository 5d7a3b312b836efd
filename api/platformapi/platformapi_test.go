package platformapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// TestRoutesRegister: every route has a method and an /api/v1 path, no
// pattern repeats, and all of them register on one ServeMux (which
// panics on conflicting patterns).
func TestRoutesRegister(t *testing.T) {
	mux := http.NewServeMux()
	seen := map[string]bool{}
	for _, rt := range New(Config{}).Routes() {
		method, path, ok := strings.Cut(rt.Pattern, " ")
		if !ok || method == "" || !strings.HasPrefix(path, "/api/v1/") || rt.Handler == nil {
			t.Errorf("route %q: want \"METHOD /api/v1/...\" and a handler", rt.Pattern)
		}
		if seen[rt.Pattern] {
			t.Errorf("route %q twice", rt.Pattern)
		}
		seen[rt.Pattern] = true
		mux.HandleFunc(rt.Pattern, rt.Handler)
	}
}

func TestListPage(t *testing.T) {
	tests := []struct {
		query  string
		cursor string
		limit  int
		bad    bool
	}{
		{"", "", 0, false},
		{"limit=5&cursor=c1", "c1", 5, false},
		{"limit=200", "", 200, false},
		{"limit=0", "", 0, true},
		{"limit=201", "", 0, true},
		{"limit=x", "", 0, true},
	}
	for _, tt := range tests {
		cursor, limit, err := listPage(httptest.NewRequest(http.MethodGet, "/api/v1/agents?"+tt.query, nil))
		if tt.bad {
			if sandbox.CodeOf(err) != platform.CodeInvalid {
				t.Errorf("%q: %v, want %s", tt.query, err, platform.CodeInvalid)
			}
			continue
		}
		if err != nil || cursor != tt.cursor || limit != tt.limit {
			t.Errorf("%q: %q %d %v, want %q %d", tt.query, cursor, limit, err, tt.cursor, tt.limit)
		}
	}
}

func TestAsPlatformInvalid(t *testing.T) {
	err := asPlatformInvalid(sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid JSON body: x"))
	if sandbox.CodeOf(err) != platform.CodeInvalid || sandbox.MessageOf(err) != "invalid JSON body: x" {
		t.Fatalf("%v: want %s with the message kept", err, platform.CodeInvalid)
	}
	other := sandbox.Errorf(sandbox.CodePayloadTooLarge, "too big")
	if asPlatformInvalid(other) != other {
		t.Fatal("another code was changed")
	}
}

// leases is a Store with one lease per stream; it keeps no idempotent
// answers.
type leases map[string]store.Lease

func (l leases) GetLease(_ context.Context, stream string) (store.Lease, error) {
	return l[stream], nil
}
func (leases) PutIdempotency(context.Context, store.Idempotency) (store.Idempotency, bool, error) {
	return store.Idempotency{}, false, errors.New("not kept")
}
func (leases) CompleteIdempotency(context.Context, store.Idempotency) error {
	return errors.New("not kept")
}
func (leases) DeleteIdempotency(context.Context, string) error { return errors.New("not kept") }

// TestForwardToHolder: a request about a Session whose lease another live
// replica holds goes there, marked as forwarded; one already forwarded,
// or whose lease is this replica's, lapsed or not a URL, stays here.
func TestForwardToHolder(t *testing.T) {
	var got *http.Request
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.WriteHeader(http.StatusAccepted)
	}))
	defer holder.Close()
	live := time.Now().Add(time.Minute)
	h := New(Config{Holder: "http://me", ForwardKey: []byte("replicas-shared-key"), Store: leases{
		"elsewhere": {Holder: holder.URL, ExpiresAt: live},
		"here":      {Holder: "http://me", ExpiresAt: live},
		"lapsed":    {Holder: holder.URL, ExpiresAt: time.Now().Add(-time.Second)},
		"not-a-url": {Holder: "holder", ExpiresAt: live},
	}})
	tests := []struct {
		session   string
		forwarded string // the request's HeaderForwarded
		want      bool
	}{
		{"elsewhere", "", true},
		{"elsewhere", "http://other", false},
		{"here", "", false},
		{"lapsed", "", false},
		{"not-a-url", "", false},
		{"none", "", false},
	}
	for _, tt := range tests {
		got = nil
		r := httptest.NewRequest(http.MethodPost, "/api/v1/sessions/"+tt.session+"/interrupt", nil)
		if tt.forwarded != "" {
			r.Header.Set(httpx.HeaderForwarded, tt.forwarded)
		}
		w := httptest.NewRecorder()
		if did := h.forwardToHolder(w, r, tt.session); did != tt.want {
			t.Errorf("%s (forwarded by %q): forwarded %v, want %v", tt.session, tt.forwarded, did, tt.want)
			continue
		}
		if !tt.want {
			continue
		}
		if got == nil || got.URL.Path != r.URL.Path || !strings.HasPrefix(got.Header.Get(httpx.HeaderForwarded), "http://me ") ||
			!httpx.CheckForwarded(got, h.cfg.ForwardKey) || w.Code != http.StatusAccepted {
			t.Errorf("%s: the holder got %v, the client %d", tt.session, got, w.Code)
		}
	}
}
