package sandboxtest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// testReattach plays a server restart: a box made through Provider() is
// re-attached from its state blob by a second Provider on the same host
// state (Reopener), which then reaches, inspects and deletes it.
func testReattach(t *testing.T, h Harness) {
	ro, ok := h.(Reopener)
	if !ok {
		t.Skip("the harness cannot make a second provider on the same state (Reopener)")
	}
	p := h.Provider()
	if _, ok := p.(sandbox.Attacher); !ok {
		t.Skipf("backend %s cannot re-attach (sandbox.Attacher)", p.Name())
	}
	ctx := ctxFor(t, 3*time.Minute)
	b := NewBox(t, h, nil)
	mustRun(t, b, "mkdir -p reattach && echo written-before > reattach/mark")
	if _, err := b.Client.Run(ctx, wire.RunCommandRequest{Command: "sleep 600", Background: true}); err != nil {
		t.Fatal(err)
	}
	blob := b.Info.StateBlob
	if len(blob) == 0 {
		t.Fatal("Create returned no state blob")
	}

	p2 := ro.Reopen(t)
	if p2 == p {
		t.Fatal("Reopen returned the harness's provider, not a new one")
	}
	a, ok := p2.(sandbox.Attacher)
	if !ok {
		t.Fatalf("the reopened provider (%T) is no sandbox.Attacher", p2)
	}
	info, err := a.Attach(ctx, b.ID, blob)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	if info.ID != b.ID || info.State != sandbox.StateRunning || info.AccessToken != b.Info.AccessToken || len(info.StateBlob) == 0 {
		t.Fatalf("attach returned %+v, want %s Running with the box's token and a state blob", info, b.ID)
	}
	if again, err := a.Attach(ctx, b.ID, info.StateBlob); err != nil || again.State != sandbox.StateRunning {
		t.Fatalf("a second attach: %+v, %v", again, err)
	}
	if got, err := p2.Inspect(ctx, b.ID); err != nil || got.State != sandbox.StateRunning || got.AccessToken != b.Info.AccessToken {
		t.Fatalf("inspect through the new provider: %+v, %v", got, err)
	}
	list, err := p2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list, func(i sandbox.Info) bool { return i.ID == b.ID && i.State == sandbox.StateRunning }) {
		t.Fatalf("the new provider does not list %s running: %+v", b.ID, list)
	}

	b2 := &Box{ID: b.ID, Info: info, Client: Connect(p2, info)}
	if err := b2.Client.WaitReady(ctx); err != nil {
		t.Fatalf("execd through the new provider: %v", err)
	}
	if out := mustRun(t, b2, "cat reattach/mark"); out != "written-before\n" {
		t.Fatalf("the file written before the restart reads %q", out)
	}
	if n, err := b2.Client.RunningCommands(ctx); err != nil || n != 1 {
		t.Fatalf("running commands through the new provider: %d, %v; want the one started before", n, err)
	}

	badBlobs := []struct {
		name string
		blob []byte
	}{
		{"empty", nil},
		{"not JSON", []byte("not a state blob")},
		{"no version", []byte("{}")},
		{"unknown version", withVersion(t, blob, 1<<20)},
	}
	for _, tt := range badBlobs {
		t.Run("BadBlob/"+tt.name, func(t *testing.T) {
			if _, err := a.Attach(ctx, b.ID, tt.blob); !errors.Is(err, sandbox.ErrBadStateBlob) {
				t.Fatalf("attach: %v, want ErrBadStateBlob", err)
			}
			if got, err := p2.Inspect(ctx, b.ID); err != nil || got.State != sandbox.StateRunning {
				t.Fatalf("the box after a refused attach: %+v, %v", got, err)
			}
		})
	}
	t.Run("AnotherBoxsBlob", func(t *testing.T) {
		other := NewID()
		if _, err := a.Attach(ctx, other, blob); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("attach of %s with %s's blob: %v, want ErrNotFound", other, b.ID, err)
		}
		if _, err := p2.Inspect(ctx, other); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("inspect of %s after a refused attach: %v, want ErrNotFound", other, err)
		}
	})

	if err := p2.Delete(ctx, b.ID); err != nil {
		t.Fatalf("delete through the new provider: %v", err)
	}
	for name, pr := range map[string]sandbox.Provider{"new": p2, "first": p} {
		if _, err := pr.Inspect(ctx, b.ID); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("inspect through the %s provider after delete: %v, want ErrNotFound", name, err)
		}
	}
	if lc, ok := h.(LeakChecker); ok {
		lc.CheckGone(t, b.ID)
	}
	if _, err := a.Attach(ctx, b.ID, blob); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("attach after delete: %v, want ErrNotFound", err)
	}

	t.Run("RecordLost", func(t *testing.T) {
		o, ok := h.(Orphaner)
		if !ok {
			t.Skip("the harness cannot drop a box's record (Orphaner)")
		}
		b := NewBox(t, h, nil)
		o.Orphan(t, b.ID)
		if got, err := p2.Inspect(ctx, b.ID); !errors.Is(err, sandbox.ErrNotFound) && (err != nil || got.State != sandbox.StateFailed) {
			t.Fatalf("inspect of a box without a record: %+v, %v; want ErrNotFound or Failed", got, err)
		}
		info, err := a.Attach(ctx, b.ID, b.Info.StateBlob)
		if err != nil || info.State != sandbox.StateRunning || info.AccessToken != b.Info.AccessToken {
			t.Fatalf("attach restoring the record: %+v, %v", info, err)
		}
		for name, pr := range map[string]sandbox.Provider{"new": p2, "first": p} {
			if got, err := pr.Inspect(ctx, b.ID); err != nil || got.State != sandbox.StateRunning {
				t.Fatalf("inspect through the %s provider after the record came back: %+v, %v", name, got, err)
			}
		}
		if out := mustRun(t, &Box{ID: b.ID, Info: info, Client: Connect(p2, info)}, "echo restored"); out != "restored\n" {
			t.Fatalf("a command through the restored record: %q", out)
		}
	})
}

// withVersion returns blob with its "version" member set to v; it fails
// the test when blob is not the JSON object with an integer version that
// sandbox.Attacher prescribes.
func withVersion(t *testing.T, blob []byte, v int) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	var old int
	if err := json.Unmarshal(blob, &m); err != nil {
		t.Fatalf("state blob is not a JSON object: %v", err)
	}
	if err := json.Unmarshal(m["version"], &old); err != nil || old == 0 {
		t.Fatalf("state blob has no integer version (%q): %v", m["version"], err)
	}
	m["version"], _ = json.Marshal(v)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
