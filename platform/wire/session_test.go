package wire

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"
)

// TestSessionJSON pins a Session's keys, the nulls of its nullable fields
// and its time format (RFC 3339 in UTC, the fraction without trailing
// zeros), and that the SDK-only Repeated and Replayed stay off the wire.
func TestSessionJSON(t *testing.T) {
	at := time.Date(2025, 5, 1, 10, 0, 0, 120000, time.UTC)
	s := Session{ID: "ses_1", AgentID: "agt_1", EngineKind: "astrabox", State: SessionReady, PendingInputs: []PendingInput{},
		Runtime: SessionRuntime{State: RuntimeNone}, CreatedAt: at, UpdatedAt: at}
	got := decodeMap(t, s)
	want := []string{"session_id", "agent_id", "engine_kind", "state", "title", "current_turn_id", "last_seq", "pending_interaction",
		"pending_inputs", "sandbox_id", "runtime", "owner_id", "created_at", "updated_at"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, slices.Sorted(slices.Values(want))) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	for _, k := range []string{"current_turn_id", "pending_interaction", "sandbox_id"} {
		if got[k] != nil {
			t.Errorf("%s is %v, want null", k, got[k])
		}
	}
	rt := got["runtime"].(map[string]any)
	if len(rt) != 3 || rt["state"] != "none" || rt["holder"] != nil || rt["lease_expires_at"] != nil {
		t.Errorf("runtime %v, want state none, holder and lease_expires_at null", rt)
	}
	if got["created_at"] != "2025-05-01T10:00:00.00012Z" {
		t.Errorf("created_at %v", got["created_at"])
	}
	if r := decodeMap(t, Receipt{InputID: "in_1", Repeated: true}); len(r) != 5 || r["repeated"] != nil {
		t.Errorf("receipt %v: want its 5 keys, not Repeated", r)
	}
	if c := decodeMap(t, Conversation{SessionID: "ses_1", AgentID: "agt_1", Replayed: true}); len(c) != 2 {
		t.Errorf("conversation %v: want its 2 keys, not Replayed", c)
	}
}

// TestEngineJSON: an Engine's descriptor fields are at its top level,
// beside images.
func TestEngineJSON(t *testing.T) {
	got := decodeMap(t, Engine{EngineDescriptor: EngineDescriptor{Kind: "astrabox", PermissionModes: []string{"auto"}}, Images: map[string]bool{"native": true}})
	if got["kind"] != "astrabox" || got["images"] == nil || got["permission_modes"] == nil || got["EngineDescriptor"] != nil {
		t.Fatalf("engine %v", got)
	}
}

func decodeMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
