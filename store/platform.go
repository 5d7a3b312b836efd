package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrFenced is returned by a fenced write (an append, a native-state save,
// a lease renewal) whose lease epoch is no longer the stream's: another
// holder took the stream over, and the caller must stop writing.
var ErrFenced = errors.New("store: fenced out: the lease epoch changed")

// Agent is a configured agent: which program runs, with which model,
// instructions and tools, on which RuntimeProfile by default.
type Agent struct {
	ID             string
	Name           string
	EngineKind     string
	RuntimeProfile string
	Model          string
	Instructions   string
	PermissionMode string
	// Tools is nil for "every tool the program has".
	Tools    []string
	VaultIDs []string
	// OwnerID is the user (a User's ID) that made the agent and OrgID that
	// user's organization: set on create, kept as created by UpdateAgent.
	// Records from before owners were kept read back as owner "admin" in
	// org "default".
	OwnerID string
	OrgID   string
	// Visibility is who may see and use the agent besides its owner and
	// Admins: VisibilityPrivate (no one), VisibilityShared (the users of
	// AllowedUserIDs) or VisibilityPublic (everyone). The store keeps what
	// it is given; records from before read back as VisibilityPrivate.
	Visibility string
	// AllowedUserIDs are the users a shared agent is shared with; nil (or
	// empty) for none.
	AllowedUserIDs []string
	// Admins are the users besides the owner who may manage the agent; nil
	// (or empty) for none.
	Admins []string
	// Version is 1 after create and increases with every update.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Agent visibilities.
const (
	VisibilityPrivate = "private"
	VisibilityShared  = "shared"
	VisibilityPublic  = "public"
)

// Agents keeps Agent records.
type Agents interface {
	// CreateAgent inserts a (Version set to 1, zero times set to now and
	// written back); ErrConflict if the id exists.
	CreateAgent(ctx context.Context, a *Agent) error
	// GetAgent returns the record or ErrNotFound.
	GetAgent(ctx context.Context, id string) (*Agent, error)
	// UpdateAgent replaces the record if its stored Version equals
	// a.Version, then increments a.Version and sets UpdatedAt to now if it
	// is zero; ErrConflict on another version, ErrNotFound if absent.
	// CreatedAt, OwnerID and OrgID keep their stored values, which are
	// written back into a.
	UpdateAgent(ctx context.Context, a *Agent) error
	// DeleteAgent removes the record; ErrNotFound if absent.
	DeleteAgent(ctx context.Context, id string) error
	// ListAgents returns up to limit records with ID > afterID, ordered by
	// ID (limit <= 0: all).
	ListAgents(ctx context.Context, afterID string, limit int) ([]*Agent, error)
}

// Session is one conversation with an Agent and the state of its runtime.
type Session struct {
	ID         string
	AgentID    string
	EngineKind string
	// State is one of the platform's session states (CREATING, READY,
	// BUSY, INTERRUPTING, RECOVERY_REQUIRED, TERMINATED, DELETED).
	State         string
	Title         string
	CurrentTurnID string
	// PendingInteraction is the JSON of the approval or question waiting
	// for an answer; nil when none.
	PendingInteraction json.RawMessage
	// Answer is the JSON of the answer to PendingInteraction that the
	// Session's front recorded for the holder of its runtime to deliver;
	// nil when none waits. The holder clears it with PendingInteraction.
	Answer json.RawMessage
	// InterruptRequestedAt is when the Session's front asked the holder of
	// its runtime to stop the reply in progress; nil when no request
	// waits. The holder clears it once carried out (or once no reply is in
	// progress), so that it never reaches a later reply.
	InterruptRequestedAt *time.Time
	// SandboxID is the box the runtime lives in; "" when none.
	SandboxID string
	// Runtime is the runner's re-attach record (JSON: the program's execd
	// command id, the stdout byte offset read so far, ...); opaque here.
	Runtime json.RawMessage
	// NativeKey is the program's own id of its conversation.
	NativeKey string
	// OwnerID is the user (a User's ID) that started the session and OrgID
	// that user's organization: set on create, kept as created by
	// UpdateSession. Records from before owners were kept read back as
	// owner "admin" in org "default".
	OwnerID      string
	OrgID        string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	LastActiveAt time.Time
	// Version is 1 after create and increases with every update.
	Version int64
}

// SessionFilter selects sessions; zero fields select all.
type SessionFilter struct {
	AgentID string
	// OwnerID selects one owner's sessions; "" selects every owner's.
	OwnerID string
	States  []string
	// AfterID and Limit page by ID (Limit <= 0: all).
	AfterID string
	Limit   int
}

// Sessions keeps Session records.
type Sessions interface {
	// CreateSession inserts s (Version set to 1, zero times set to now and
	// written back) and creates its log stream (empty, epoch 0);
	// ErrConflict if the id exists.
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns the record or ErrNotFound.
	GetSession(ctx context.Context, id string) (*Session, error)
	// UpdateSession replaces the record if its stored Version equals
	// s.Version, then increments s.Version (a zero UpdatedAt is set to now);
	// ErrConflict on another version, ErrNotFound if absent. CreatedAt,
	// OwnerID and OrgID keep their stored values, which are written back
	// into s.
	UpdateSession(ctx context.Context, s *Session) error
	// DeleteSession removes the record with its inputs, its log stream and
	// its native state; ErrNotFound if absent.
	DeleteSession(ctx context.Context, id string) error
	// ListSessions returns matching records ordered by ID.
	ListSessions(ctx context.Context, f SessionFilter) ([]*Session, error)
	// CountSessions returns how many Sessions are in each state (states
	// with none are absent).
	CountSessions(ctx context.Context) (map[string]int, error)
}

// Input states, in the order an input passes through them (failed may
// follow any of the first three).
const (
	InputAccepted  = "accepted"
	InputDelivered = "delivered"
	InputConsumed  = "consumed"
	InputAnswered  = "answered"
	InputFailed    = "failed"
)

// Input is a user input sent to a Session, with its receipt.
type Input struct {
	ID              string
	SessionID       string
	TurnID          string
	ClientMessageID string // "" when the client sent none
	Content         string
	// Seq is the log seq of the input's input.accepted event.
	Seq   int64
	State string
	// Error is the code of a failed input ("SANDBOX_GONE", ...).
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Inputs keeps the inputs of Sessions.
type Inputs interface {
	// AcceptInput records in and appends accepted to the session's log
	// stream (unfenced) in one transaction: in.Seq is set to the entry's
	// seq, in.State to InputAccepted, zero times to now. When the session
	// already has an input with the same non-empty ClientMessageID, nothing
	// is written and that input is returned with true. ErrNotFound if the
	// session does not exist.
	AcceptInput(ctx context.Context, in *Input, accepted LogEntry) (*Input, bool, error)
	// GetInput returns the input or ErrNotFound.
	GetInput(ctx context.Context, id string) (*Input, error)
	// ListInputs returns the session's inputs in one of states (all when
	// none given), ordered by Seq.
	ListInputs(ctx context.Context, sessionID string, states ...string) ([]*Input, error)
	// SetInputState moves the input to state (with errCode, "" unless
	// failed) if its current state is one of from (any state when from is
	// empty), and returns the updated input; ErrConflict if it is in
	// another state, ErrNotFound if absent.
	SetInputState(ctx context.Context, id, state, errCode string, from ...string) (*Input, error)
}

// LogEntry is one event of a durable log stream.
type LogEntry struct {
	// Seq is the entry's position in its stream: 1, 2, 3, ... without gaps.
	Seq       int64
	Type      string
	TurnID    string
	InputID   string
	MessageID string
	// Payload is JSON (an object, or null).
	Payload json.RawMessage
	// Source is the writer's own resume position after this entry (the
	// runner: the byte offset in the program's output up to which this
	// entry accounts for everything), 0 when it has none; stored with the
	// entry, so a new holder resumes exactly where the log ends.
	Source int64
	At     time.Time
}

// Lease is who holds a stream's writer role and until when.
type Lease struct {
	Holder    string
	Epoch     int64
	ExpiresAt time.Time
}

// Streams keeps durable, gap-free, sequence-numbered logs (a Session's
// output log is the stream named by its id) and the lease that fences
// their holder's writes. Times of leases are the database's clock.
type Streams interface {
	// Append adds entries to the stream (creating it if absent) with the
	// next seqs, in one transaction, and returns the seq of the first. With
	// epoch > 0 it is fenced: it fails with ErrFenced unless the stream's
	// lease epoch equals epoch. With epoch 0 it is unfenced (input
	// acceptance from any replica). Zero At fields are set to now. Entries
	// become visible to ReadStream only all at once, when committed, so a
	// reader that has seen seq n never later finds a new entry at or below n.
	Append(ctx context.Context, stream string, epoch int64, entries []LogEntry) (int64, error)
	// ReadStream returns up to limit entries with Seq > afterSeq in order
	// (limit <= 0: all); none, and no error, for an unknown stream.
	ReadStream(ctx context.Context, stream string, afterSeq, limit int64) ([]LogEntry, error)
	// StreamHead returns the stream's last seq (0 when empty or unknown).
	StreamHead(ctx context.Context, stream string) (int64, error)
	// LastOfType returns the stream's last entry of type typ with Seq <=
	// atOrBefore, read through an index on (stream, type, seq): one entry,
	// however long the stream. ok is false (and no error) when there is
	// none, or the stream is unknown.
	LastOfType(ctx context.Context, stream, typ string, atOrBefore int64) (e LogEntry, ok bool, err error)
	// NextOfType returns the stream's first entry of type typ with Seq >
	// after, through the same index; ok false when none.
	NextOfType(ctx context.Context, stream, typ string, after int64) (e LogEntry, ok bool, err error)
	// LastSource returns the largest Source of the stream's entries (0
	// when none has one).
	LastSource(ctx context.Context, stream string) (int64, error)
	// AcquireLease makes holder the stream's lease holder for ttl if the
	// lease is free, expired or already holder's, and returns the lease.
	// The epoch increases whenever the holder changes (or the lease had
	// expired) and stays when holder renews its live lease this way.
	// ErrConflict (with the current lease) when another holder's lease is
	// live.
	AcquireLease(ctx context.Context, stream, holder string, ttl time.Duration) (Lease, error)
	// RenewLease extends holder's lease of epoch by ttl from now;
	// ErrFenced if the stream's lease is no longer (holder, epoch) or it
	// expired.
	RenewLease(ctx context.Context, stream, holder string, epoch int64, ttl time.Duration) (Lease, error)
	// ReleaseLease ends holder's lease of epoch at once (a no-op if it is
	// no longer theirs).
	ReleaseLease(ctx context.Context, stream, holder string, epoch int64) error
	// GetLease returns the stream's lease (a zero Lease when none).
	GetLease(ctx context.Context, stream string) (Lease, error)
	// DeleteSandboxStreamsBefore deletes, with their entries, the streams
	// of sandboxes (named SandboxStreamPrefix + the sandbox's id) that
	// have no sandbox record and no entry at or after before, at most
	// limit of them (limit <= 0: all), and returns how many it deleted. A
	// sandbox's state events are such a stream: they outlive its record
	// for a retention, then go.
	DeleteSandboxStreamsBefore(ctx context.Context, before time.Time, limit int) (int64, error)
}

// SandboxStreamPrefix begins the name of a sandbox's stream (its state
// events), which the sandbox's id ends.
const SandboxStreamPrefix = "sandbox:"

// NativeStates keeps a program's own conversation records, mirrored by
// byte offset: the stored bytes are a prefix of the program's file.
type NativeStates interface {
	// AppendNativeState stores data at offset of the session's native
	// state, fenced by the stream lease epoch (as Append; 0 unfenced). If
	// offset is below the stored size the overlapping bytes are skipped
	// (a repeated save); above it, ErrConflict (a gap). It returns the
	// stored size afterwards.
	AppendNativeState(ctx context.Context, sessionID string, epoch, offset int64, data []byte) (int64, error)
	// NativeState returns the stored bytes (nil when none).
	NativeState(ctx context.Context, sessionID string) ([]byte, error)
	// ResetNativeState drops the stored bytes (a program that started a
	// new conversation file).
	ResetNativeState(ctx context.Context, sessionID string, epoch int64) error
}
