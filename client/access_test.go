package client_test

import (
	"slices"
	"testing"

	"github.com/astrabox/astrabox/client"
)

// TestAgentAccess shares an Agent with a member through the SDK: before,
// the member cannot see it; after, they can read it and its access but
// not change it.
func TestAgentAccess(t *testing.T) {
	env, admin := newPlatform(t)
	ctx := testCtx(t)
	a := newAgent(t, env, admin, "auto")
	if _, err := admin.CreateUser(ctx, client.UserRequest{ID: "mia", Role: ptr(client.RoleMember)}); err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateUserAPIKey(ctx, "mia", client.APIKeyRequest{Name: "sdk"})
	if err != nil {
		t.Fatal(err)
	}
	mia := client.New(env.URL, k.Key)

	got, err := admin.AgentAccess(ctx, a.ID)
	if err != nil || got.Visibility != "private" {
		t.Fatalf("a new Agent's access: %+v, %v", got, err)
	}
	if _, err := mia.GetAgent(ctx, a.ID); client.CodeOf(err) != "AGENT_NOT_FOUND" {
		t.Fatalf("mia reads a private Agent: %v, want AGENT_NOT_FOUND", err)
	}
	set, err := admin.SetAgentAccess(ctx, a.ID, client.AgentAccess{Visibility: "shared", AllowedUserIDs: []string{"mia"}})
	if err != nil || set.Visibility != "shared" || !slices.Equal(set.AllowedUserIDs, []string{"mia"}) {
		t.Fatalf("share: %+v, %v", set, err)
	}
	if _, err := mia.GetAgent(ctx, a.ID); err != nil {
		t.Fatalf("mia reads the shared Agent: %v", err)
	}
	if got, err := mia.AgentAccess(ctx, a.ID); err != nil || got.Visibility != "shared" {
		t.Fatalf("mia reads its access: %+v, %v", got, err)
	}
	if _, err := mia.SetAgentAccess(ctx, a.ID, client.AgentAccess{Visibility: "public"}); client.CodeOf(err) != "FORBIDDEN" {
		t.Fatalf("mia changes its access: %v, want FORBIDDEN", err)
	}
}
