package platform

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/streamlog"
)

// Runtimes are the Sessions' runtimes as the front drives them (the runner
// manager of this replica implements it). Inputs, interrupts and answers
// reach a runtime one way, wherever it runs: recorded in the store, then
// a wake-up (see requests.go).
type Runtimes interface {
	// Wake tells the Session's runtime that the store has work for it (an
	// input, an interrupt, an answer), and starts one here if none runs.
	Wake(sessionID string)
	// Release stops the Session's runtime and deletes its sandbox.
	Release(ctx context.Context, sessionID string) error
}

// SessionStore is the part of the store the Sessions front uses:
// Sessions' records, their inputs, and their log streams with leases.
type SessionStore interface {
	store.Sessions
	store.Inputs
	store.Streams
}

// SessionsConfig configures the Sessions front.
type SessionsConfig struct {
	Store SessionStore
	// Catalog resolves the Agent a conversation is opened with.
	Catalog *Catalog
	// Log is the durable log whose notifier wakes the Session's followers
	// and, through WakeStream, its holder on any replica.
	Log *streamlog.Log
	// Runtimes drives the Sessions' runtimes.
	Runtimes Runtimes
	Logger   *slog.Logger
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Sessions is the platform's Session front: it opens conversations,
// records inputs with receipts, interrupts and answers and wakes the
// runtime, deletes Sessions, and reads their replies and
// messages. It never runs a program itself. It is safe for concurrent use.
type Sessions struct {
	cfg SessionsConfig
	st  SessionStore
	cat *Catalog
	rt  Runtimes
	log *slog.Logger
	now func() time.Time
}

// NewSessions returns the Sessions front; Store, Catalog, Log and
// Runtimes are required.
func NewSessions(cfg SessionsConfig) (*Sessions, error) {
	if cfg.Store == nil || cfg.Catalog == nil || cfg.Log == nil || cfg.Runtimes == nil {
		return nil, errors.New("platform: sessions: store, catalog, log and runtimes are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Sessions{cfg: cfg, st: cfg.Store, cat: cfg.Catalog, rt: cfg.Runtimes, log: cfg.Logger, now: cfg.Now}, nil
}

func (s *Sessions) stamp() time.Time { return stamp(s.now()) }
