package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/sandbox"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// testCtx bounds one test's calls.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newPlatform starts a server with the fake model's script and returns it
// with a client of it.
func newPlatform(t *testing.T, script ...fakemodel.Reply) (*servertest.Env, *client.Client) {
	t.Helper()
	env := servertest.New(t, servertest.Options{Script: script})
	return env, client.New(env.URL, servertest.Key)
}

// testProfile is RuntimeProfile name on env's backend with the fake model.
func testProfile(env *servertest.Env, name string) client.RuntimeProfile {
	return client.RuntimeProfile{Name: name, Backend: env.Backend, EngineKinds: []string{"astrabox"}, IdleTimeoutSeconds: 600,
		Model: &client.ModelEndpoint{BaseURL: env.Model.URL(), APIKey: servertest.ModelKey, Models: []string{"fake-1", "fake-2"}}}
}

// newAgent stores profile "test" and an Agent on it in permission mode
// mode.
func newAgent(t *testing.T, env *servertest.Env, c *client.Client, mode string) client.Agent {
	t.Helper()
	ctx := testCtx(t)
	if _, err := c.PutRuntimeProfile(ctx, testProfile(env, "test")); err != nil {
		t.Fatal(err)
	}
	a, err := c.CreateAgent(ctx, client.AgentRequest{Name: "coder", RuntimeProfile: "test", Model: "fake-1", PermissionMode: mode, Instructions: "Be brief."})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// until follows the session's log after seq after and returns the events
// up to the first for which stop is true.
func until(t *testing.T, c *client.Client, sid string, after int64, stop func(client.Event) bool) []client.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var evs []client.Event
	err := c.Follow(ctx, sid, after, func(e client.Event) error {
		evs = append(evs, e)
		if stop(e) {
			return client.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("follow: %v after %d events", err, len(evs))
	}
	return evs
}

func turnEnded(turnID string) func(client.Event) bool {
	return func(e client.Event) bool { return e.Type == "turn.ended" && e.TurnID == turnID }
}

// TestProfilesAndAgents covers the engine, RuntimeProfile and Agent calls
// and their error codes.
func TestProfilesAndAgents(t *testing.T) {
	env, c := newPlatform(t)
	ctx := testCtx(t)

	engines, err := c.ListEngines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(engines, func(e client.Engine) bool { return e.Kind == "astrabox" })
	if i < 0 || !slices.Contains(engines[i].Tools, "shell") || !slices.Contains(engines[i].PermissionModes, "ask") || !engines[i].Images[env.Backend] {
		t.Fatalf("engines %+v", engines)
	}

	put, err := c.PutRuntimeProfile(ctx, testProfile(env, "p1"))
	if err != nil {
		t.Fatal(err)
	}
	if !put.APIKeySet || put.Model == nil || put.Model.APIKey != "" || put.Version < 1 || put.IdleTimeoutSeconds != 600 || put.Model.API != "openai-chat" {
		t.Fatalf("stored profile %+v (model %+v)", put, put.Model)
	}
	got, err := c.GetRuntimeProfile(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(got); strings.Contains(string(b), servertest.ModelKey) || got.Version != put.Version {
		t.Fatalf("profile view %s", b)
	}
	// The record read back puts as it is: a conditional update that keeps
	// the sealed key.
	got.IdleTimeoutSeconds = 1200
	again, err := c.PutRuntimeProfile(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	if again.Version != got.Version+1 || !again.APIKeySet || again.IdleTimeoutSeconds != 1200 {
		t.Fatalf("conditional update %+v", again)
	}
	list, err := c.ListRuntimeProfiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list, func(p client.RuntimeProfile) bool { return p.Name == "p1" && p.APIKeySet }) {
		t.Fatalf("list %+v", list)
	}

	a, err := c.CreateAgent(ctx, client.AgentRequest{Name: "coder", RuntimeProfile: "p1", PermissionMode: "ask", Tools: []string{"shell", "read_file"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.EngineKind != "astrabox" || a.Model != "fake-1" || a.Version < 1 || !strings.HasPrefix(a.ID, "agt_") {
		t.Fatalf("agent %+v", a)
	}
	if g, err := c.GetAgent(ctx, a.ID); err != nil || g.Name != "coder" || !slices.Equal(g.Tools, []string{"shell", "read_file"}) {
		t.Fatalf("get agent %+v, %v", g, err)
	}
	v := a.Version
	up, err := c.UpdateAgent(ctx, a.ID, client.AgentRequest{Name: "coder-2", RuntimeProfile: "p1", Model: "fake-2", Version: &v})
	if err != nil {
		t.Fatal(err)
	}
	if up.Name != "coder-2" || up.Model != "fake-2" || up.Version != v+1 {
		t.Fatalf("updated agent %+v", up)
	}

	stale := got // at the version before the conditional update
	tests := []struct {
		name string
		call func() error
		code sandbox.Code
	}{
		{"missing agent", func() error { _, err := c.GetAgent(ctx, "agt_missing"); return err }, "AGENT_NOT_FOUND"},
		{"missing profile", func() error { _, err := c.GetRuntimeProfile(ctx, "nope"); return err }, "PROFILE_NOT_FOUND"},
		{"missing session", func() error { _, err := c.GetSession(ctx, "ses_missing"); return err }, "SESSION_NOT_FOUND"},
		{"agent without a name", func() error { _, err := c.CreateAgent(ctx, client.AgentRequest{RuntimeProfile: "p1"}); return err }, "INVALID_REQUEST"},
		{"model the profile does not offer", func() error {
			_, err := c.CreateAgent(ctx, client.AgentRequest{Name: "x", RuntimeProfile: "p1", Model: "other"})
			return err
		}, "INVALID_REQUEST"},
		{"stale agent version", func() error {
			_, err := c.UpdateAgent(ctx, a.ID, client.AgentRequest{Name: "late", RuntimeProfile: "p1", Version: &v})
			return err
		}, "VERSION_CONFLICT"},
		{"stale profile version", func() error { _, err := c.PutRuntimeProfile(ctx, stale); return err }, "VERSION_CONFLICT"},
		{"engine not installed", func() error {
			_, err := c.CreateAgent(ctx, client.AgentRequest{Name: "x", RuntimeProfile: "p1", EngineKind: "nope"})
			return err
		}, "ENGINE_NOT_INSTALLED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ae *client.APIError
			if client.CodeOf(err) != tt.code || !errors.As(err, &ae) || ae.Message == "" {
				t.Fatalf("err %v, want code %s", err, tt.code)
			}
		})
	}

	if err := c.DeleteAgent(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetAgent(ctx, a.ID); client.CodeOf(err) != "AGENT_NOT_FOUND" {
		t.Fatalf("deleted agent: %v", err)
	}
	if err := c.DeleteRuntimeProfile(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRuntimeProfile(ctx, "p1"); client.CodeOf(err) != "PROFILE_NOT_FOUND" {
		t.Fatalf("deleted profile: %v", err)
	}
}

// TestPaging pages Agents and Sessions: every item once, pages within the
// limit, and no cursor after the last page.
func TestPaging(t *testing.T) {
	env, c := newPlatform(t)
	ctx := testCtx(t)
	first := newAgent(t, env, c, "auto")
	ids := []string{first.ID}
	for i := 0; i < 4; i++ {
		a, err := c.CreateAgent(ctx, client.AgentRequest{Name: "a", RuntimeProfile: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	var sessions []string
	for i := 0; i < 3; i++ {
		conv, err := c.CreateConversation(ctx, first.ID, client.ConversationOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, conv.SessionID)
	}
	other, err := c.CreateConversation(ctx, ids[1], client.ConversationOptions{})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		limit int
		list  func(client.PageOptions) ([]string, string, error)
		want  []string
		pages int
	}{
		{"agents by 2", 2, func(p client.PageOptions) ([]string, string, error) {
			pg, err := c.ListAgents(ctx, p)
			return agentIDs(pg.Items), pg.NextCursor, err
		}, ids, 3},
		{"agents by 5", 5, func(p client.PageOptions) ([]string, string, error) {
			pg, err := c.ListAgents(ctx, p)
			return agentIDs(pg.Items), pg.NextCursor, err
		}, ids, 1},
		{"one agent's sessions by 2", 2, func(p client.PageOptions) ([]string, string, error) {
			pg, err := c.ListSessions(ctx, first.ID, p)
			return sessionIDs(pg.Items), pg.NextCursor, err
		}, sessions, 2},
		{"all sessions by 3", 3, func(p client.PageOptions) ([]string, string, error) {
			pg, err := c.ListSessions(ctx, "", p)
			return sessionIDs(pg.Items), pg.NextCursor, err
		}, append(slices.Clone(sessions), other.SessionID), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			page, pages := client.PageOptions{Limit: tt.limit}, 0
			for {
				items, next, err := tt.list(page)
				if err != nil {
					t.Fatal(err)
				}
				if len(items) > tt.limit {
					t.Fatalf("page of %d items, limit %d", len(items), tt.limit)
				}
				got, pages = append(got, items...), pages+1
				if next == "" {
					break
				}
				page.Cursor = next
			}
			// Ids made within one millisecond may sort either way.
			if !slices.Equal(sorted(got), sorted(tt.want)) || pages != tt.pages {
				t.Fatalf("paged %v in %d pages, want %v in %d", got, pages, tt.want, tt.pages)
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func agentIDs(as []client.Agent) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func sessionIDs(ss []client.Session) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}
