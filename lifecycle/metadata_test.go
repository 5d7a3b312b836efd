package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

func str(s string) *string { return &s }

// entries returns n metadata entries k<prefix><i> with values of size
// bytes.
func entries(prefix string, n, size int) map[string]*string {
	out := map[string]*string{}
	for i := range n {
		out[fmt.Sprintf("k%s%d", prefix, i)] = str(strings.Repeat("v", size))
	}
	return out
}

// TestMetadataLimitsOnEveryWrite checks issue #12's "metadata PATCH
// bypasses the create limits": a create and a patch are held to the same
// bounds, a patch as the record it would leave, so that patches cannot
// add up to a record a create would refuse.
func TestMetadataLimitsOnEveryWrite(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, 0)
	now := time.Now().UTC()
	rec := &store.Sandbox{ID: "m1", Backend: "process", State: sandbox.StateRunning, CreatedAt: now, UpdatedAt: now}
	if err := svc.cfg.Store.CreateSandbox(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// Twenty patches of eight 1 KiB values: the record would reach 160 KiB.
	var refused error
	for i := range 20 {
		if _, err := svc.PatchMetadata(ctx, "m1", entries(fmt.Sprint(i, "-"), 8, 1024)); err != nil {
			refused = err
			break
		}
	}
	if sandbox.CodeOf(refused) != sandbox.CodeInvalidRequest || !strings.Contains(sandbox.MessageOf(refused), fmt.Sprintf("at most %d", MaxMetadataBytes)) {
		t.Fatalf("accumulating patches: %v, want INVALID_REQUEST_BODY naming %d bytes", refused, MaxMetadataBytes)
	}
	got, err := svc.Get(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateMetadata(got.Metadata); err != nil {
		t.Fatalf("stored record is beyond the bounds: %v", err)
	}

	tests := []struct {
		name  string
		patch map[string]*string
		want  string // in the message; "" for accepted
	}{
		{"one entry too many", entries("x", MaxMetadataEntries+1, 1), "at most 64 are allowed"},
		{"value too long", map[string]*string{"a": str(strings.Repeat("v", MaxMetadataValueBytes+1))}, "values up to 1024 bytes"},
		{"key too long", map[string]*string{strings.Repeat("k", MaxMetadataKeyBytes+1): str("v")}, "keys 1-128 bytes"},
		{"key with '='", map[string]*string{"a=b": str("v")}, "without '='"},
		{"removals only", map[string]*string{"k0-0": nil, "k0-1": nil}, ""},
		{"small set", map[string]*string{"team": str("ml")}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := svc.Get(ctx, "m1")
			_, err := svc.PatchMetadata(ctx, "m1", tc.patch)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if sandbox.CodeOf(err) != sandbox.CodeInvalidRequest || !strings.Contains(sandbox.MessageOf(err), tc.want) {
				t.Fatalf("patch: %v, want %q", err, tc.want)
			}
			after, _ := svc.Get(ctx, "m1")
			if after.Version != before.Version {
				t.Fatalf("a refused patch wrote the record (version %d -> %d)", before.Version, after.Version)
			}
		})
	}

	// A create is held to the same bounds.
	big := map[string]string{}
	for k, v := range entries("c", 20, 1000) {
		big[k] = *v
	}
	if _, _, _, err := svc.plan(ctx, CreateRequest{Metadata: big}); sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
		t.Fatalf("create with %d bytes of metadata: %v", 20*1000, err)
	}
}
