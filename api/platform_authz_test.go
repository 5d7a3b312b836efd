package api_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/fakemodel"
)

// platformEnv is a server with a runtime profile "rp" whose model is a
// fake endpoint, and members alice, bob and carol and a viewer vic.
type platformEnv struct {
	e                      *env
	alice, bob, carol, vic string
}

func newPlatformEnv(t *testing.T) *platformEnv {
	t.Helper()
	e := newEnv(t, 0)
	model := fakemodel.New(t, fakemodel.Text("hello"), fakemodel.Text("hello"), fakemodel.Text("hello"))
	if st, out := callAs(t, e, testKey, "PUT", "/api/v1/runtime-profiles/rp", map[string]any{"backend": "process",
		"model": map[string]any{"base_url": model.URL(), "models": []string{"fake-1"}}}); st != 200 {
		t.Fatalf("put the runtime profile: %d %v", st, out)
	}
	return &platformEnv{e: e, alice: user(t, e, "alice", "member"), bob: user(t, e, "bob", "member"),
		carol: user(t, e, "carol", "member"), vic: user(t, e, "vic", "viewer")}
}

// agent creates an Agent as key with access (nil: left private) and
// returns its id.
func (pe *platformEnv) agent(t *testing.T, key string, access map[string]any) string {
	t.Helper()
	st, out := callAs(t, pe.e, key, "POST", "/api/v1/agents", map[string]any{"name": "a", "runtime_profile": "rp"})
	if st != 201 {
		t.Fatalf("create an agent: %d %v", st, out)
	}
	id := out["agent_id"].(string)
	if access != nil {
		if st, out := callAs(t, pe.e, key, "PUT", "/api/v1/agents/"+id+"/access", access); st != 200 {
			t.Fatalf("set the access of %s: %d %v", id, st, out)
		}
	}
	return id
}

// open opens a conversation with agent as key and returns the Session's id.
func (pe *platformEnv) open(t *testing.T, key, agent string) string {
	t.Helper()
	st, out := callAs(t, pe.e, key, "POST", "/api/v1/agents/"+agent+"/conversations", map[string]any{})
	if st != 201 {
		t.Fatalf("open a conversation with %s: %d %v", agent, st, out)
	}
	return out["session_id"].(string)
}

// want returns a check of a call's answer (callAs's): it fails unless the
// call answered status with code ("" for any).
func want(t *testing.T, what string, status int, code string) func(int, map[string]any) {
	return func(st int, out map[string]any) {
		t.Helper()
		if st != status || (code != "" && out["code"] != code) {
			t.Errorf("%s: %d %v, want %d %s", what, st, out, status, code)
		}
	}
}

// TestPlatformAuthorization: a member neither sees nor touches another
// member's private Agent or Session (each answers as a missing one), an
// Agent shared with a member is usable by it and its Session is its own, a
// viewer reads a public Agent but opens no conversation, and only an
// administrator gives an Agent vaults.
func TestPlatformAuthorization(t *testing.T) {
	pe := newPlatformEnv(t)
	e := pe.e
	private := pe.agent(t, pe.alice, nil)
	aliceSession := pe.open(t, pe.alice, private)

	// Bob sees neither alice's private Agent nor her Session.
	want(t, "bob gets alice's private agent", 404, "AGENT_NOT_FOUND")(callAs(t, e, pe.bob, "GET", "/api/v1/agents/"+private, nil))
	st, missing := callAs(t, e, pe.bob, "GET", "/api/v1/agents/agt_nope", nil)
	_, hidden := callAs(t, e, pe.bob, "GET", "/api/v1/agents/"+private, nil)
	if st != 404 || strings.Replace(hidden["message"].(string), private, "agt_nope", 1) != missing["message"] {
		t.Errorf("a hidden agent answers %v, a missing one %d %v: not alike", hidden, st, missing)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/agents/" + private + "/access"},
		{"PUT", "/api/v1/agents/" + private},
		{"DELETE", "/api/v1/agents/" + private},
		{"PUT", "/api/v1/agents/" + private + "/access"},
		{"POST", "/api/v1/agents/" + private + "/conversations"},
	} {
		st, out := callAs(t, e, pe.bob, c.method, c.path, map[string]any{"name": "x", "runtime_profile": "rp", "visibility": "public"})
		want(t, "bob: "+c.method+" "+c.path, 404, "AGENT_NOT_FOUND")(st, out)
	}
	s := "/api/v1/sessions/" + aliceSession
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", s, nil},
		{"POST", s + "/turn-inputs", map[string]any{"content": "hi"}},
		{"POST", s + "/interrupt", nil},
		{"POST", s + "/interaction-respond", map[string]any{"interaction_id": "int_1", "answer": map[string]any{"decision": "approve"}}},
		{"GET", s + "/messages", nil},
		{"GET", s + "/events?follow=false", nil},
		{"GET", s + "/ai-stream?follow=session", nil},
		{"DELETE", s, nil},
	} {
		st, out := callAs(t, e, pe.bob, c.method, c.path, c.body)
		want(t, "bob: "+c.method+" "+c.path, 404, "SESSION_NOT_FOUND")(st, out)
	}
	if sessions(t, e, pe.bob) != nil {
		t.Errorf("bob lists sessions %v, want none", sessions(t, e, pe.bob))
	}
	if got := sessions(t, e, pe.alice); !slices.Equal(got, []string{aliceSession}) {
		t.Errorf("alice lists %v, want her session", got)
	}
	if got := sessions(t, e, testKey); !slices.Contains(got, aliceSession) {
		t.Errorf("the administrator lists %v, without alice's session", got)
	}
	st, out := callAs(t, e, testKey, "GET", s, nil)
	if st != 200 || out["owner_id"] != "alice" {
		t.Errorf("the administrator gets alice's session: %d %v", st, out)
	}

	// Shared with bob, the Agent is his to use, not to manage; carol still
	// does not see it.
	st, acc := callAs(t, e, pe.alice, "PUT", "/api/v1/agents/"+private+"/access", map[string]any{"visibility": "shared", "allowed_user_ids": []string{"bob"}})
	if st != 200 || acc["visibility"] != "shared" || len(acc["allowed_user_ids"].([]any)) != 1 || acc["admins"] == nil {
		t.Fatalf("alice shares her agent: %d %v", st, acc)
	}
	st, ag := callAs(t, e, pe.bob, "GET", "/api/v1/agents/"+private, nil)
	if st != 200 || ag["owner_id"] != "alice" || ag["visibility"] != "shared" {
		t.Fatalf("bob gets the shared agent: %d %v", st, ag)
	}
	want(t, "bob reads its access", 200, "")(callAs(t, e, pe.bob, "GET", "/api/v1/agents/"+private+"/access", nil))
	want(t, "bob updates it", 403, "FORBIDDEN")(callAs(t, e, pe.bob, "PUT", "/api/v1/agents/"+private, map[string]any{"name": "mine", "runtime_profile": "rp"}))
	want(t, "bob deletes it", 403, "FORBIDDEN")(callAs(t, e, pe.bob, "DELETE", "/api/v1/agents/"+private, nil))
	want(t, "bob changes its access", 403, "FORBIDDEN")(callAs(t, e, pe.bob, "PUT", "/api/v1/agents/"+private+"/access", map[string]any{"visibility": "public"}))
	want(t, "carol gets it", 404, "AGENT_NOT_FOUND")(callAs(t, e, pe.carol, "GET", "/api/v1/agents/"+private, nil))
	bobSession := pe.open(t, pe.bob, private)
	st, out = callAs(t, e, pe.bob, "GET", "/api/v1/sessions/"+bobSession, nil)
	if st != 200 || out["owner_id"] != "bob" {
		t.Fatalf("bob gets his session: %d %v", st, out)
	}
	want(t, "bob sends an input", 201, "")(callAs(t, e, pe.bob, "POST", "/api/v1/sessions/"+bobSession+"/turn-inputs", map[string]any{"content": "hi"}))
	want(t, "alice gets bob's session", 404, "SESSION_NOT_FOUND")(callAs(t, e, pe.alice, "GET", "/api/v1/sessions/"+bobSession, nil))
	if got := sessions(t, e, pe.bob); !slices.Equal(got, []string{bobSession}) {
		t.Errorf("bob lists %v, want his session", got)
	}

	// A viewer reads a public Agent but opens no conversation.
	public := pe.agent(t, pe.alice, map[string]any{"visibility": "public"})
	want(t, "vic gets the public agent", 200, "")(callAs(t, e, pe.vic, "GET", "/api/v1/agents/"+public, nil))
	st, out = callAs(t, e, pe.vic, "GET", "/api/v1/agents", nil)
	if st != 200 || len(out["items"].([]any)) != 1 {
		t.Errorf("vic lists %d %v, want the public agent only", st, out)
	}
	want(t, "vic opens a conversation", 403, "FORBIDDEN")(callAs(t, e, pe.vic, "POST", "/api/v1/agents/"+public+"/conversations", map[string]any{}))
	want(t, "vic gets the private one", 404, "AGENT_NOT_FOUND")(callAs(t, e, pe.vic, "GET", "/api/v1/agents/"+private, nil))

	// Vaults are the administrator's to assign.
	st, v := callAs(t, e, testKey, "POST", "/api/v1/vaults", map[string]any{"name": "v"})
	if st != 201 {
		t.Fatalf("create a vault: %d %v", st, v)
	}
	st, out = callAs(t, e, pe.alice, "POST", "/api/v1/agents", map[string]any{"name": "a", "runtime_profile": "rp", "vault_ids": []string{v["vault_id"].(string)}})
	if st != 403 || out["code"] != "FORBIDDEN" || !strings.Contains(out["message"].(string), "admin") {
		t.Errorf("alice gives her agent a vault: %d %v, want 403 FORBIDDEN naming admin", st, out)
	}
	want(t, "alice reads the runtime profiles", 200, "")(callAs(t, e, pe.alice, "GET", "/api/v1/runtime-profiles", nil))

	// The administrator manages alice's Agent; alice deletes hers.
	want(t, "the administrator makes it private", 200, "")(callAs(t, e, testKey, "PUT", "/api/v1/agents/"+private+"/access", map[string]any{"visibility": "private"}))
	want(t, "bob gets it again", 404, "AGENT_NOT_FOUND")(callAs(t, e, pe.bob, "GET", "/api/v1/agents/"+private, nil))
	want(t, "alice deletes her session", 204, "")(callAs(t, e, pe.alice, "DELETE", s, nil))
}

// TestStreamEndsWhenAccessEnds: a Session's sandbox is its owner's, and an
// open ai-stream and events stream of the Session end, within seconds,
// once its user is disabled.
func TestStreamEndsWhenAccessEnds(t *testing.T) {
	pe := newPlatformEnv(t)
	e := pe.e
	dan := user(t, e, "dan", "member")
	public := pe.agent(t, pe.alice, map[string]any{"visibility": "public"})
	sid := pe.open(t, dan, public)

	type ended struct {
		body string
		err  error
	}
	follow := func(path string) <-chan ended {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+dan)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		done := make(chan ended, 1)
		go func() {
			defer resp.Body.Close()
			var b strings.Builder
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				b.WriteString(sc.Text() + "\n")
			}
			done <- ended{b.String(), sc.Err()}
		}()
		return done
	}
	ai := follow("/api/v1/sessions/" + sid + "/ai-stream?follow=session")
	events := follow("/api/v1/sessions/" + sid + "/events")
	// The Session's sandbox is dan's: his to reach, hidden from alice.
	start := time.Now()
	var box string
	for box == "" {
		st, out := callAs(t, e, dan, "GET", "/api/v1/sessions/"+sid, nil)
		if st != 200 {
			t.Fatalf("dan gets his session: %d %v", st, out)
		}
		box, _ = out["sandbox_id"].(string)
		if time.Since(start) > time.Minute {
			t.Fatalf("the session has no sandbox after a minute: %v", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want(t, "dan gets his session's sandbox", 200, "")(callAs(t, e, dan, "GET", "/v1/sandboxes/"+box, nil))
	want(t, "alice gets dan's session's sandbox", 404, "SANDBOX_NOT_FOUND")(callAs(t, e, pe.alice, "GET", "/v1/sandboxes/"+box, nil))
	if d := 1500*time.Millisecond - time.Since(start); d > 0 {
		time.Sleep(d) // a re-check or more while dan may still read
	}
	select {
	case got := <-ai:
		t.Fatalf("the ai-stream ended while dan had access: %q %v", got.body, got.err)
	case got := <-events:
		t.Fatalf("the events stream ended while dan had access: %q %v", got.body, got.err)
	default:
	}

	if st, out := callAs(t, e, testKey, "PATCH", "/api/v1/admin/users/dan", map[string]any{"disabled": true}); st != 200 {
		t.Fatalf("disable dan: %d %v", st, out)
	}
	disabled := time.Now()
	for name, ch := range map[string]<-chan ended{"ai-stream": ai, "events": events} {
		select {
		case got := <-ch:
			if got.err != nil {
				t.Errorf("%s ended with %v, want its end", name, got.err)
			}
			if name == "ai-stream" && !strings.Contains(got.body, `"type":"error"`) {
				t.Errorf("the ai-stream ended without an error chunk: %q", got.body)
			}
			t.Logf("%s ended %v after dan was disabled", name, time.Since(disabled))
		case <-time.After(15 * time.Second):
			t.Fatalf("the %s stream still runs 15s after dan was disabled", name)
		}
	}
	want(t, "dan reads his session", 401, "UNAUTHORIZED")(callAs(t, e, dan, "GET", "/api/v1/sessions/"+sid, nil))
}

// sessions lists the ids of the Sessions key sees (nil for none).
func sessions(t *testing.T, e *env, key string) []string {
	t.Helper()
	st, out := callAs(t, e, key, "GET", "/api/v1/sessions", nil)
	if st != 200 {
		t.Fatalf("list sessions: %d %v", st, out)
	}
	var ids []string
	for _, it := range out["items"].([]any) {
		ids = append(ids, it.(map[string]any)["session_id"].(string))
	}
	return ids
}
