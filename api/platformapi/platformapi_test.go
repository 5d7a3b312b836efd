package platformapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
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
