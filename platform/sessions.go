package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Session states (wire.SessionState), as the store keeps them.
const (
	StateCreating         = string(wire.SessionCreating)
	StateReady            = string(wire.SessionReady)
	StateBusy             = string(wire.SessionBusy)
	StateInterrupting     = string(wire.SessionInterrupting)
	StateRecoveryRequired = string(wire.SessionRecoveryRequired)
	StateTerminated       = string(wire.SessionTerminated)
	StateDeleted          = string(wire.SessionDeleted)
)

// WakeStream names the notification a Session's runtime holder listens
// to for new work (inputs from any replica).
func WakeStream(sessionID string) string { return "wake:" + sessionID }

// MaxInputBytes bounds one input's content.
const MaxInputBytes = 1 << 20

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// toSession builds the wire form, with the log head, pending inputs and
// lease read now. A pending interaction the record holds but that does
// not decode (never written so) shows as none, as Respond treats it.
func (s *Sessions) toSession(ctx context.Context, rec *store.Session) (wire.Session, error) {
	head, err := s.st.StreamHead(ctx, rec.ID)
	if err != nil {
		return wire.Session{}, fmt.Errorf("session log head: %w", err)
	}
	ins, err := s.st.ListInputs(ctx, rec.ID, store.InputAccepted, store.InputDelivered)
	if err != nil {
		return wire.Session{}, fmt.Errorf("pending inputs: %w", err)
	}
	pending := make([]wire.PendingInput, len(ins))
	for i, in := range ins {
		pending[i] = wire.PendingInput{InputID: in.ID, TurnID: in.TurnID, Seq: in.Seq, State: in.State}
	}
	lease, err := s.st.GetLease(ctx, rec.ID)
	if err != nil {
		return wire.Session{}, fmt.Errorf("session lease: %w", err)
	}
	rt := wire.SessionRuntime{State: wire.RuntimeNone}
	if lease.Holder != "" {
		rt.State = wire.RuntimeHeld
		if !lease.ExpiresAt.After(s.now()) {
			rt.State = wire.RuntimeExpired
		}
		rt.Holder = nullable(lease.Holder)
		at := stamp(lease.ExpiresAt)
		rt.LeaseExpiresAt = &at
	}
	var pi *wire.Interaction
	if len(rec.PendingInteraction) > 0 && len(rec.Answer) == 0 { // an answered one waits only for its delivery
		pi = new(wire.Interaction)
		if err := json.Unmarshal(rec.PendingInteraction, pi); err != nil {
			s.log.Warn("a session's pending interaction does not decode; shown as none", "session_id", rec.ID, "err", err)
			pi = nil
		}
	}
	return wire.Session{ID: rec.ID, AgentID: rec.AgentID, EngineKind: rec.EngineKind, State: wire.SessionState(rec.State), Title: rec.Title,
		CurrentTurnID: nullable(rec.CurrentTurnID), LastSeq: head, PendingInteraction: pi, PendingInputs: pending,
		SandboxID: nullable(rec.SandboxID), Runtime: rt, OwnerID: rec.OwnerID, CreatedAt: stamp(rec.CreatedAt), UpdatedAt: stamp(rec.UpdatedAt)}, nil
}

// CreateSession opens a conversation with an Agent the caller may see
// (AGENT_NOT_FOUND otherwise); the Session, and its sandbox, are the
// caller's. Its runtime starts building at once, so that it is ready, or
// nearly, when the first input comes.
func (s *Sessions) CreateSession(ctx context.Context, agentID, title string) (wire.Session, error) {
	a, err := s.cat.visibleAgent(ctx, agentID)
	if err != nil {
		return wire.Session{}, err
	}
	p := principal(ctx)
	if err := needWrite(p, fmt.Sprintf("opening a conversation with agent %s", agentID)); err != nil {
		return wire.Session{}, err
	}
	if len(title) > 500 || !utf8.ValidString(title) {
		return wire.Session{}, invalid("title must be valid UTF-8 of at most 500 bytes")
	}
	now := s.stamp()
	rec := &store.Session{ID: NewID("ses", now), AgentID: a.ID, EngineKind: a.EngineKind, State: StateCreating,
		Title: strings.TrimSpace(title), CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
	if p != nil {
		rec.OwnerID, rec.OrgID = p.UserID, p.OrgID
	}
	if err := s.st.CreateSession(ctx, rec); err != nil {
		return wire.Session{}, fmt.Errorf("create session: %w", err)
	}
	s.rt.Wake(rec.ID)
	return s.toSession(ctx, rec)
}

// GetSession returns a Session of the caller (any, for an
// administrator), or SESSION_NOT_FOUND.
func (s *Sessions) GetSession(ctx context.Context, id string) (wire.Session, error) {
	rec, err := s.visibleSession(ctx, id)
	if err != nil {
		return wire.Session{}, err
	}
	return s.toSession(ctx, rec)
}

// ListSessions pages the caller's Sessions (everyone's, for an
// administrator), of one Agent when agentID is set.
func (s *Sessions) ListSessions(ctx context.Context, agentID, cursor string, limit int) ([]wire.Session, string, error) {
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	f := store.SessionFilter{AgentID: agentID, AfterID: cursor, Limit: limit + 1}
	if p := principal(ctx); p != nil && !p.IsAdmin() {
		if p.UserID == "" {
			return []wire.Session{}, "", nil
		}
		f.OwnerID = p.UserID
	}
	recs, err := s.st.ListSessions(ctx, f)
	if err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	next := ""
	if len(recs) > limit {
		recs = recs[:limit]
		next = recs[limit-1].ID
	}
	out := make([]wire.Session, 0, len(recs))
	for _, r := range recs {
		w, err := s.toSession(ctx, r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, w)
	}
	return out, next, nil
}

// SendInput records an input and wakes the Session's runtime, and reports
// whether it recorded it ("created"). A repeated clientMessageID returns
// the first receipt, with Repeated set (and false for "created").
func (s *Sessions) SendInput(ctx context.Context, sessionID, content, clientMessageID string) (wire.Receipt, bool, error) {
	if strings.TrimSpace(content) == "" {
		return wire.Receipt{}, false, invalid("content is required")
	}
	if len(content) > MaxInputBytes || !utf8.ValidString(content) {
		return wire.Receipt{}, false, invalid("content must be valid UTF-8 of at most %d bytes", MaxInputBytes)
	}
	if len(clientMessageID) > 200 {
		return wire.Receipt{}, false, invalid("client_message_id exceeds 200 bytes")
	}
	rec, err := s.actableSession(ctx, sessionID, "sending an input to")
	if err != nil {
		return wire.Receipt{}, false, err
	}
	if err := s.checkAgentStillVisible(ctx, rec); err != nil {
		return wire.Receipt{}, false, err
	}
	if rec.State == StateDeleted {
		return wire.Receipt{}, false, sandbox.Errorf(CodeSessionDeleted, "session %q was deleted", sessionID)
	}
	now := s.stamp()
	in := &store.Input{ID: NewID("in", now), SessionID: sessionID, TurnID: NewID("turn", now), ClientMessageID: clientMessageID,
		Content: content, CreatedAt: now, UpdatedAt: now}
	payload, _ := json.Marshal(map[string]any{"content": content, "client_message_id": clientMessageID})
	got, existed, err := s.st.AcceptInput(ctx, in, store.LogEntry{Type: "input.accepted", TurnID: in.TurnID, InputID: in.ID, Payload: payload, At: now})
	if errors.Is(err, store.ErrNotFound) {
		return wire.Receipt{}, false, sessionNotFound(sessionID)
	}
	if err != nil {
		return wire.Receipt{}, false, fmt.Errorf("accept input: %w", err)
	}
	s.cfg.Log.Notifier.Notify(sessionID)
	if !existed {
		s.wakeHolder(sessionID)
		if rec.Title == "" {
			s.titleFromInput(ctx, sessionID, content)
		}
	}
	return wire.Receipt{InputID: got.ID, TurnID: got.TurnID, ClientMessageID: got.ClientMessageID, Seq: got.Seq, State: got.State,
		Repeated: existed}, !existed, nil
}

// DeleteSession releases the Session's sandbox and deletes the Session
// with its log.
func (s *Sessions) DeleteSession(ctx context.Context, sessionID string) error {
	if _, err := s.actableSession(ctx, sessionID, "deleting"); err != nil {
		return err
	}
	if err := s.rt.Release(ctx, sessionID); err != nil {
		return err
	}
	if err := s.st.DeleteSession(ctx, sessionID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("delete session: %w", err)
	}
	s.cfg.Log.Notifier.Notify(sessionID)
	return nil
}

// checkAgentStillVisible refuses an input to a Session whose Agent its
// caller may no longer see (unshared since the Session was opened) with
// AGENT_NOT_FOUND, as a deleted Agent's Session fails its inputs: a
// Session keeps no right to use an Agent. An administrator passes; a
// missing Agent is left to the runner, which fails the input.
func (s *Sessions) checkAgentStillVisible(ctx context.Context, rec *store.Session) error {
	p := principal(ctx)
	if p == nil || p.IsAdmin() {
		return nil
	}
	a, err := s.cat.st.GetAgent(ctx, rec.AgentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get agent: %w", err)
	}
	if !canSeeAgent(p, a) {
		return agentNotFound(rec.AgentID)
	}
	return nil
}

// maxTitleRunes bounds a title taken from an input.
const maxTitleRunes = 60

// titleFromInput gives an untitled Session its first input's first line
// as its title (at most maxTitleRunes, cut at a word with an ellipsis). A
// failure is logged: the input is recorded already.
func (s *Sessions) titleFromInput(ctx context.Context, sessionID, content string) {
	title := TitleOf(content)
	for {
		rec, err := s.st.GetSession(ctx, sessionID)
		if err != nil || rec.Title != "" {
			return
		}
		rec.Title, rec.UpdatedAt = title, time.Time{}
		err = s.st.UpdateSession(ctx, rec)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			s.log.Warn("title a session from its first input", "session_id", sessionID, "err", err)
		}
		return
	}
}

// TitleOf is the title a Session takes from an input: its first non-empty
// line, spaces folded, at most maxTitleRunes runes (cut at a word, with
// an ellipsis).
func TitleOf(content string) string {
	var line string
	for l := range strings.Lines(content) {
		if line = strings.Join(strings.Fields(l), " "); line != "" {
			break
		}
	}
	r := []rune(line)
	if len(r) <= maxTitleRunes {
		return line
	}
	cut := string(r[:maxTitleRunes-1])
	if i := strings.LastIndexByte(cut, ' '); i > maxTitleRunes/2 && r[maxTitleRunes-1] != ' ' {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,.;:") + "…"
}
