package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/astrabox/astrabox/platform/engine"
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

// Session is the wire form of a Session.
type Session struct {
	ID                 string          `json:"session_id"`
	AgentID            string          `json:"agent_id"`
	EngineKind         string          `json:"engine_kind"`
	State              string          `json:"state"`
	Title              string          `json:"title"`
	CurrentTurnID      *string         `json:"current_turn_id"`
	LastSeq            int64           `json:"last_seq"`
	PendingInteraction json.RawMessage `json:"pending_interaction"`
	PendingInputs      []PendingInput  `json:"pending_inputs"`
	SandboxID          *string         `json:"sandbox_id"`
	Runtime            RuntimeInfo     `json:"runtime"`
	CreatedAt          string          `json:"created_at"`
	UpdatedAt          string          `json:"updated_at"`
}

// PendingInput is an input not yet consumed.
type PendingInput struct {
	InputID string `json:"input_id"`
	TurnID  string `json:"turn_id"`
	Seq     int64  `json:"seq"`
	State   string `json:"state"`
}

// RuntimeInfo says who holds a Session's runtime.
type RuntimeInfo struct {
	// State is "none", "held" or "expired".
	State          string  `json:"state"`
	Holder         *string `json:"holder"`
	LeaseExpiresAt *string `json:"lease_expires_at"`
}

// Receipt answers an input.
type Receipt struct {
	InputID         string `json:"input_id"`
	TurnID          string `json:"turn_id"`
	ClientMessageID string `json:"client_message_id"`
	Seq             int64  `json:"seq"`
	State           string `json:"state"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// session returns the record or SESSION_NOT_FOUND.
func (s *Sessions) session(ctx context.Context, id string) (*store.Session, error) {
	rec, err := s.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, sandbox.Errorf(CodeSessionNotFound, "session %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	return rec, nil
}

// toSession builds the wire form, with the log head, pending inputs and
// lease read now.
func (s *Sessions) toSession(ctx context.Context, rec *store.Session) (Session, error) {
	head, err := s.st.StreamHead(ctx, rec.ID)
	if err != nil {
		return Session{}, fmt.Errorf("session log head: %w", err)
	}
	ins, err := s.st.ListInputs(ctx, rec.ID, store.InputAccepted, store.InputDelivered)
	if err != nil {
		return Session{}, fmt.Errorf("pending inputs: %w", err)
	}
	pending := make([]PendingInput, len(ins))
	for i, in := range ins {
		pending[i] = PendingInput{InputID: in.ID, TurnID: in.TurnID, Seq: in.Seq, State: in.State}
	}
	lease, err := s.st.GetLease(ctx, rec.ID)
	if err != nil {
		return Session{}, fmt.Errorf("session lease: %w", err)
	}
	rt := RuntimeInfo{State: "none"}
	if lease.Holder != "" {
		rt.State = "held"
		if !lease.ExpiresAt.After(s.now()) {
			rt.State = "expired"
		}
		rt.Holder = nullable(lease.Holder)
		rt.LeaseExpiresAt = nullable(lease.ExpiresAt.UTC().Format(timeFormat))
	}
	pi := rec.PendingInteraction
	if len(pi) == 0 {
		pi = json.RawMessage("null")
	}
	return Session{ID: rec.ID, AgentID: rec.AgentID, EngineKind: rec.EngineKind, State: rec.State, Title: rec.Title,
		CurrentTurnID: nullable(rec.CurrentTurnID), LastSeq: head, PendingInteraction: pi, PendingInputs: pending,
		SandboxID: nullable(rec.SandboxID), Runtime: rt,
		CreatedAt: rec.CreatedAt.Format(timeFormat), UpdatedAt: rec.UpdatedAt.Format(timeFormat)}, nil
}

// CreateSession opens a conversation with an Agent. Its runtime starts
// building at once, so that it is ready, or nearly, when the first input
// comes.
func (s *Sessions) CreateSession(ctx context.Context, agentID, title string) (Session, error) {
	a, err := s.cat.agent(ctx, agentID)
	if err != nil {
		return Session{}, err
	}
	if len(title) > 500 || !utf8.ValidString(title) {
		return Session{}, invalid("title must be valid UTF-8 of at most 500 bytes")
	}
	now := s.stamp()
	rec := &store.Session{ID: NewID("ses", now), AgentID: a.ID, EngineKind: a.EngineKind, State: StateCreating,
		Title: strings.TrimSpace(title), CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
	if err := s.st.CreateSession(ctx, rec); err != nil {
		return Session{}, fmt.Errorf("create session: %w", err)
	}
	s.rt.Wake(rec.ID)
	return s.toSession(ctx, rec)
}

// GetSession returns a Session.
func (s *Sessions) GetSession(ctx context.Context, id string) (Session, error) {
	rec, err := s.session(ctx, id)
	if err != nil {
		return Session{}, err
	}
	return s.toSession(ctx, rec)
}

// ListSessions pages Sessions (of one Agent when agentID is set).
func (s *Sessions) ListSessions(ctx context.Context, agentID, cursor string, limit int) ([]Session, string, error) {
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	recs, err := s.st.ListSessions(ctx, store.SessionFilter{AgentID: agentID, AfterID: cursor, Limit: limit + 1})
	if err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	next := ""
	if len(recs) > limit {
		recs = recs[:limit]
		next = recs[limit-1].ID
	}
	out := make([]Session, 0, len(recs))
	for _, r := range recs {
		w, err := s.toSession(ctx, r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, w)
	}
	return out, next, nil
}

// SendInput records an input and wakes the Session's runtime. A repeated
// clientMessageID returns the first receipt (and false for "created").
func (s *Sessions) SendInput(ctx context.Context, sessionID, content, clientMessageID string) (Receipt, bool, error) {
	if strings.TrimSpace(content) == "" {
		return Receipt{}, false, invalid("content is required")
	}
	if len(content) > MaxInputBytes || !utf8.ValidString(content) {
		return Receipt{}, false, invalid("content must be valid UTF-8 of at most %d bytes", MaxInputBytes)
	}
	if len(clientMessageID) > 200 {
		return Receipt{}, false, invalid("client_message_id exceeds 200 bytes")
	}
	rec, err := s.session(ctx, sessionID)
	if err != nil {
		return Receipt{}, false, err
	}
	if rec.State == StateDeleted {
		return Receipt{}, false, sandbox.Errorf(CodeSessionDeleted, "session %q was deleted", sessionID)
	}
	now := s.stamp()
	in := &store.Input{ID: NewID("in", now), SessionID: sessionID, TurnID: NewID("turn", now), ClientMessageID: clientMessageID,
		Content: content, CreatedAt: now, UpdatedAt: now}
	payload, _ := json.Marshal(map[string]any{"content": content, "client_message_id": clientMessageID})
	got, existed, err := s.st.AcceptInput(ctx, in, store.LogEntry{Type: "input.accepted", TurnID: in.TurnID, InputID: in.ID, Payload: payload, At: now})
	if errors.Is(err, store.ErrNotFound) {
		return Receipt{}, false, sandbox.Errorf(CodeSessionNotFound, "session %q not found", sessionID)
	}
	if err != nil {
		return Receipt{}, false, fmt.Errorf("accept input: %w", err)
	}
	s.cfg.Log.Notifier.Notify(sessionID)
	if !existed {
		// The holder of the Session's runtime may be another replica: it
		// hears this; a local runner is woken (or started) directly.
		s.cfg.Log.Notifier.Notify(WakeStream(sessionID))
		s.rt.Wake(sessionID)
	}
	return Receipt{InputID: got.ID, TurnID: got.TurnID, ClientMessageID: got.ClientMessageID, Seq: got.Seq, State: got.State}, !existed, nil
}

// Interrupt asks the Session to stop the reply in progress; it reports
// whether there was one.
func (s *Sessions) Interrupt(ctx context.Context, sessionID string) (bool, error) {
	if _, err := s.session(ctx, sessionID); err != nil {
		return false, err
	}
	return s.rt.Interrupt(ctx, sessionID)
}

// Respond answers the Session's pending interaction.
func (s *Sessions) Respond(ctx context.Context, sessionID string, a engine.Answer) error {
	rec, err := s.session(ctx, sessionID)
	if err != nil {
		return err
	}
	var pending engine.Interaction
	if len(rec.PendingInteraction) == 0 || json.Unmarshal(rec.PendingInteraction, &pending) != nil || pending.ID != a.InteractionID {
		return sandbox.Errorf(CodeInteractionClosed, "interaction %q is not open in session %s", a.InteractionID, sessionID)
	}
	if pending.Kind == "approval" && a.Decision != string(wire.DecisionApprove) && a.Decision != string(wire.DecisionReject) {
		return invalid("answer.decision must be approve or reject")
	}
	if pending.Kind == "question" && len(a.Answers) == 0 {
		return invalid("answer.answers is required for a question")
	}
	return s.rt.Answer(ctx, sessionID, a)
}

// DeleteSession releases the Session's sandbox and deletes the Session
// with its log.
func (s *Sessions) DeleteSession(ctx context.Context, sessionID string) error {
	if _, err := s.session(ctx, sessionID); err != nil {
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
