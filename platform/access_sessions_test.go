package platform_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// TestSessionOwnership: a conversation is opened by whoever sees the
// Agent and is theirs; another user's Session answers as a missing one
// on every method, an administrator's aside; the list shows a member its
// own only.
func TestSessionOwnership(t *testing.T) {
	f := newFront(t)
	f.putAgent(t, "agt_shared", store.VisibilityShared, []string{"bob"}, nil, nil)
	f.putAgent(t, "agt_public", store.VisibilityPublic, nil, nil, nil)

	for _, tc := range []struct {
		who   *identity.Principal
		agent string
		want  string
	}{
		{carol, "agt_shared", notFound},
		{vic, "agt_public", forbidden},
		{eve, "agt_public", notFound},
		{carol, "agt_missing", notFound},
	} {
		if _, err := f.sess.CreateSession(as(t, tc.who), tc.agent, ""); outcome(err) != tc.want {
			t.Errorf("%s opens a conversation with %s: %v, want %s", tc.who.UserID, tc.agent, err, tc.want)
		}
	}
	open := func(p *identity.Principal, agent string) wire.Session {
		t.Helper()
		s, err := f.sess.CreateSession(as(t, p), agent, "")
		if err != nil {
			t.Fatalf("%s opens a conversation with %s: %v", p.UserID, agent, err)
		}
		rec, err := f.st.GetSession(context.Background(), s.ID)
		if err != nil || s.OwnerID != p.UserID || rec.OwnerID != p.UserID || rec.OrgID != p.OrgID {
			t.Fatalf("%s's session is owned by %q (%+v, %v)", p.UserID, s.OwnerID, rec, err)
		}
		return s
	}
	bobs := open(bob, "agt_shared")
	alices := open(alice, "agt_shared")
	carols := open(carol, "agt_public")

	missing := "ses_missing"
	calls := map[string]func(ctx context.Context, id string) error{
		"get":   func(ctx context.Context, id string) error { _, err := f.sess.GetSession(ctx, id); return err },
		"check": func(ctx context.Context, id string) error { return f.sess.CheckSession(ctx, id) },
		"input": func(ctx context.Context, id string) error {
			_, _, err := f.sess.SendInput(ctx, id, "hi", "c1")
			return err
		},
		"interrupt": func(ctx context.Context, id string) error { _, err := f.sess.Interrupt(ctx, id); return err },
		"answer": func(ctx context.Context, id string) error {
			err := f.sess.Respond(ctx, id, engine.Answer{InteractionID: "int_1", Decision: "approve"})
			if sandbox.CodeOf(err) == platform.CodeInteractionClosed {
				return nil // passed the access check
			}
			return err
		},
		"messages": func(ctx context.Context, id string) error { _, err := f.sess.Messages(ctx, id, 0); return err },
		"log":      func(ctx context.Context, id string) error { _, err := f.sess.ReadLog(ctx, id, 0); return err },
		"resume":   func(ctx context.Context, id string) error { _, err := f.sess.ResumeReply(ctx, id, 0); return err },
		"active":   func(ctx context.Context, id string) error { _, err := f.sess.ActiveReply(ctx, id); return err },
		"follow": func(ctx context.Context, id string) error {
			return f.sess.Follow(ctx, id, 0, func(store.LogEntry) (bool, error) { return false, nil })
		},
	}
	for name, call := range calls {
		for _, tc := range []struct {
			who  *identity.Principal
			id   string
			want string
		}{
			{bob, bobs.ID, ok},
			{alice, bobs.ID, noSession},
			{carol, bobs.ID, noSession},
			{vic, bobs.ID, noSession},
			{root, bobs.ID, ok},
			{nil, bobs.ID, ok},
			{alice, missing, noSession},
		} {
			if name == "follow" && tc.want == ok {
				continue // it would wait for entries
			}
			who := "internal"
			if tc.who != nil {
				who = tc.who.UserID
			}
			err := call(as(t, tc.who), tc.id)
			if got := outcome(err); got != tc.want {
				t.Errorf("%s: %s on %s: %v, want %s", name, who, tc.id, err, tc.want)
				continue
			}
			if err != nil && sandbox.MessageOf(err) != fmt.Sprintf("session %q not found", tc.id) {
				t.Errorf("%s: %s on %s: %q, not the message for a missing session", name, who, tc.id, sandbox.MessageOf(err))
			}
		}
	}
	// A Session an internal caller opened is no one's: administrators see
	// it, members do not.
	ownerless, err := f.sess.CreateSession(as(t, nil), "agt_public", "")
	if err != nil || ownerless.OwnerID != "" {
		t.Fatalf("an internal caller opens a conversation: %+v %v", ownerless, err)
	}
	if _, err := f.sess.GetSession(as(t, alice), ownerless.ID); outcome(err) != noSession {
		t.Fatalf("a member gets an ownerless session: %v", err)
	}

	list := func(p *identity.Principal, agent string) []string {
		t.Helper()
		ss, _, err := f.sess.ListSessions(as(t, p), agent, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range ss {
			ids = append(ids, s.ID)
		}
		return ids
	}
	if got := list(bob, ""); !slices.Equal(got, []string{bobs.ID}) {
		t.Errorf("bob lists %v, want his own", got)
	}
	if got := list(alice, "agt_shared"); !slices.Equal(got, []string{alices.ID}) {
		t.Errorf("alice lists %v of agt_shared, want her own", got)
	}
	if got := list(vic, ""); len(got) != 0 {
		t.Errorf("vic lists %v, want none", got)
	}
	if got := list(root, ""); len(got) != 4 {
		t.Errorf("root lists %v, want every session", got)
	}

	// Unshared, the Agent takes no more inputs from bob's Session, which
	// he still reads.
	if _, err := f.cat.SetAgentAccess(as(t, alice), "agt_shared", wire.AgentAccess{Visibility: "private"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.sess.SendInput(as(t, bob), bobs.ID, "again", ""); outcome(err) != notFound {
		t.Errorf("bob sends to a session of an agent no longer shared with him: %v, want %s", err, notFound)
	}
	if _, err := f.sess.GetSession(as(t, bob), bobs.ID); err != nil {
		t.Errorf("bob reads his session: %v", err)
	}
	if _, _, err := f.sess.SendInput(as(t, alice), alices.ID, "again", ""); err != nil {
		t.Errorf("alice sends to her session: %v", err)
	}

	// Deleting: another's answers as missing; one's own goes.
	if err := f.sess.DeleteSession(as(t, alice), carols.ID); outcome(err) != noSession {
		t.Errorf("alice deletes carol's session: %v", err)
	}
	if err := f.sess.DeleteSession(as(t, carol), carols.ID); err != nil {
		t.Errorf("carol deletes her session: %v", err)
	}
	ctx, cancel := context.WithTimeout(as(t, alice), time.Second)
	defer cancel()
	if err := f.sess.Follow(ctx, carols.ID, 0, func(store.LogEntry) (bool, error) { return false, nil }); outcome(err) != noSession {
		t.Errorf("following a deleted session: %v", err)
	}
}
