package client_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/fakemodel"
)

// TestSessionCalls covers a conversation's calls: idempotent creation,
// inputs with receipts, an approval, an interrupt, the folded messages,
// listing and deletion.
func TestSessionCalls(t *testing.T) {
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	env, c := newPlatform(t,
		fakemodel.Call("shell", map[string]any{"command": "echo approved-ran"}),
		fakemodel.Text("ran it"),
		fakemodel.Text("this never completes").HoldUntil(gate),
	)
	ctx := testCtx(t)
	a := newAgent(t, env, c, "ask")

	conv, err := c.CreateConversation(ctx, a.ID, client.ConversationOptions{Title: "first", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	same, err := c.CreateConversation(ctx, a.ID, client.ConversationOptions{Title: "first", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if conv.Replayed || !same.Replayed || same.SessionID != conv.SessionID || conv.AgentID != a.ID {
		t.Fatalf("conversation %+v, repeated %+v", conv, same)
	}
	_, err = c.CreateConversation(ctx, a.ID, client.ConversationOptions{Title: "other", IdempotencyKey: "k1"})
	if client.CodeOf(err) != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("key reused with another body: %v", err)
	}
	sid := conv.SessionID
	s, err := c.GetSession(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if s.AgentID != a.ID || s.Title != "first" || s.EngineKind != "astrabox" || s.CreatedAt.IsZero() {
		t.Fatalf("session %+v", s)
	}
	if ok, err := c.Interrupt(ctx, sid); err != nil || ok {
		t.Fatalf("interrupt without a reply: %v, %v", ok, err)
	}

	rc, err := c.SendInput(ctx, sid, "run it", "m1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.SendInput(ctx, sid, "run it", "m1")
	if err != nil {
		t.Fatal(err)
	}
	if rc.Repeated || rc.Seq < 1 || rc.State != "accepted" || rc.ClientMessageID != "m1" ||
		!again.Repeated || again.InputID != rc.InputID || again.Seq != rc.Seq || again.TurnID != rc.TurnID {
		t.Fatalf("receipt %+v, repeated %+v", rc, again)
	}

	// The approval: asked in the stream, shown on the Session, answered.
	evs := until(t, c, sid, rc.Seq, func(e client.Event) bool { return e.Type == "data-interaction" })
	ch, err := evs[len(evs)-1].Chunk()
	if err != nil {
		t.Fatal(err)
	}
	var ia client.Interaction
	if err := json.Unmarshal(ch.Data, &ia); err != nil || ia.Kind != "approval" || ia.ToolName != "shell" {
		t.Fatalf("interaction %s: %v", ch.Data, err)
	}
	s = waitSession(t, c, sid, func(s client.Session) bool { return s.PendingInteraction != nil })
	if s.PendingInteraction.ID != ia.ID || s.State != client.SessionBusy || s.CurrentTurnID == nil || *s.CurrentTurnID != rc.TurnID {
		t.Fatalf("waiting session %+v", s)
	}
	if err := c.Respond(ctx, sid, "ia_wrong", client.Answer{Decision: client.DecisionApprove}); client.CodeOf(err) != "INTERACTION_CLOSED" {
		t.Fatalf("answer to another interaction: %v", err)
	}
	if err := c.Respond(ctx, sid, ia.ID, client.Answer{Decision: client.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	evs = until(t, c, sid, evs[len(evs)-1].Seq, turnEnded(rc.TurnID))
	var out strings.Builder
	for _, e := range evs {
		if e.Type == "tool-output-available" {
			out.Write(e.Payload)
		}
	}
	if !strings.Contains(out.String(), "approved-ran") {
		t.Fatalf("approved call's output %q", out.String())
	}

	tr, err := c.Messages(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Messages) != 2 || tr.Messages[0].ID != rc.InputID || tr.Messages[0].Text() != "run it" ||
		tr.Messages[1].Role != "assistant" || tr.Messages[1].Text() != "ran it" || tr.LastSeq < evs[len(evs)-1].Seq {
		t.Fatalf("transcript %+v", tr)
	}

	// An interrupt stops the reply in progress.
	rc2, err := c.SendInput(ctx, sid, "take your time", "")
	if err != nil {
		t.Fatal(err)
	}
	until(t, c, sid, rc2.Seq, func(e client.Event) bool { return e.Type == "text-delta" && e.TurnID == rc2.TurnID })
	if ok, err := c.Interrupt(ctx, sid); err != nil || !ok {
		t.Fatalf("interrupt: %v, %v", ok, err)
	}
	evs = until(t, c, sid, rc2.Seq, turnEnded(rc2.TurnID))
	var end struct {
		Outcome string `json:"outcome"`
	}
	_ = json.Unmarshal(evs[len(evs)-1].Payload, &end)
	if end.Outcome != "interrupted" {
		t.Fatalf("interrupted turn ended %s", evs[len(evs)-1].Payload)
	}

	page, err := c.ListSessions(ctx, a.ID, client.PageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ID != sid || page.NextCursor != "" {
		t.Fatalf("sessions %+v", page)
	}
	if err := c.DeleteSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSession(ctx, sid); client.CodeOf(err) != "SESSION_NOT_FOUND" {
		t.Fatalf("deleted session: %v", err)
	}
}

// waitSession polls the Session until ok holds for it (the Session's
// record follows its log: the record changes once the events are
// committed).
func waitSession(t *testing.T, c *client.Client, sid string, ok func(client.Session) bool) client.Session {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	ctx := testCtx(t)
	for {
		s, err := c.GetSession(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("session never reached the awaited condition: %+v", s)
		}
		<-tick.C
	}
}
