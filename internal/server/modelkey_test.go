package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/internal/fakemodel"
)

// TestLegacyModelKeyRebound: a model key sealed before keys were bound to
// their endpoint still works, and a restarted server re-seals it bound, so
// that from then on a base_url changed in the database no longer opens it.
func TestLegacyModelKeyRebound(t *testing.T) {
	h := newHarness(t, fakemodel.Text("one"), fakemodel.Text("two"))
	sid := h.session(h.agent("auto", nil))
	ctx := context.Background()

	// Store the key as it was sealed before: bound to the profile only.
	p, err := h.Store.GetProfile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(p.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	legacy, err := h.Ring.Seal([]byte(realModelKey), "profile:test:model.api_key")
	if err != nil {
		t.Fatal(err)
	}
	doc["model"].(map[string]any)["api_key_sealed"] = legacy
	p.JSON, _ = json.Marshal(doc)
	p.Version = 0
	if _, err := h.Store.PutProfile(ctx, p); err != nil {
		t.Fatal(err)
	}

	h.restart()
	p, err = h.Store.GetProfile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p.JSON), legacy) {
		t.Fatal("the legacy sealed key was not re-sealed at start")
	}
	if _, err := h.Ring.Open(legacy, "profile:test:model.api_key"); err != nil {
		t.Fatalf("the legacy seal should still open under its own AAD: %v", err)
	}
	rc := h.send(sid, "hi", "")
	evs := h.events(sid, 0, untilTurnEnded(rc.InputID))
	var end map[string]any
	_ = json.Unmarshal(evs[len(evs)-1].Payload, &end)
	if end["outcome"] != "completed" {
		t.Fatalf("with the re-bound key the reply ended %v", end)
	}

	// Bound now: an endpoint changed behind the API's back does not open it.
	_ = json.Unmarshal(p.JSON, &doc)
	doc["model"].(map[string]any)["base_url"] = "https://elsewhere.example/v1"
	p.JSON, _ = json.Marshal(doc)
	p.Version = 0
	if _, err := h.Store.PutProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	code := h.call("POST", "/api/v1/runtime-profiles/test/test-model", nil, nil)
	if code == 200 {
		t.Fatal("a key whose endpoint was changed in the database still opened")
	}
}
