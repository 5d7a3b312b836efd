// Package platform is AstraBox's agent platform: Agents, the platform
// fields of RuntimeProfiles, Sessions, and inputs with receipts. A Session's
// output lives in its durable log (platform/stream); the program that
// answers runs under platform/runner. The wire contract is PLATFORM.md as
// served in the project's OpenAPI document.
package platform

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/stream"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/vault"
)

// The platform's error codes (PLATFORM.md) and their HTTP statuses, which
// the API layer adds to its table.
const (
	CodeAgentNotFound      sandbox.Code = "AGENT_NOT_FOUND"
	CodeSessionNotFound    sandbox.Code = "SESSION_NOT_FOUND"
	CodeProfileNotFound    sandbox.Code = "PROFILE_NOT_FOUND"
	CodeInvalid            sandbox.Code = "INVALID_REQUEST"
	CodeSessionBusy        sandbox.Code = "SESSION_BUSY"
	CodeVersionConflict    sandbox.Code = "VERSION_CONFLICT"
	CodeInteractionClosed  sandbox.Code = "INTERACTION_CLOSED"
	CodeEngineNotInstalled sandbox.Code = "ENGINE_NOT_INSTALLED"
	CodeSessionDeleted     sandbox.Code = "SESSION_DELETED"
	// Credential vaults (vaults.go) and their delivery into Sessions.
	CodeVaultNotFound       sandbox.Code = "VAULT_NOT_FOUND"
	CodeSecretNotFound      sandbox.Code = "VAULT_SECRET_NOT_FOUND"
	CodeVaultInUse          sandbox.Code = "VAULT_IN_USE"
	CodeDeliveryUnsupported sandbox.Code = "PROTECTED_DELIVERY_UNSUPPORTED"
)

// StatusByCode maps the platform's codes to HTTP statuses.
var StatusByCode = map[sandbox.Code]int{
	CodeAgentNotFound:       http.StatusNotFound,
	CodeSessionNotFound:     http.StatusNotFound,
	CodeProfileNotFound:     http.StatusNotFound,
	CodeInvalid:             http.StatusBadRequest,
	CodeSessionBusy:         http.StatusConflict,
	CodeVersionConflict:     http.StatusConflict,
	CodeInteractionClosed:   http.StatusConflict,
	CodeEngineNotInstalled:  http.StatusBadRequest,
	CodeSessionDeleted:      http.StatusGone,
	CodeVaultNotFound:       http.StatusNotFound,
	CodeSecretNotFound:      http.StatusNotFound,
	CodeVaultInUse:          http.StatusConflict,
	CodeDeliveryUnsupported: http.StatusBadRequest,
}

// Waker is told when a Session has work (an input, an interrupt, an
// answer); the runner manager implements it.
type Waker interface {
	Wake(sessionID string)
	// Interrupt asks the Session's runtime to stop the reply in progress;
	// false when no reply is in progress.
	Interrupt(ctx context.Context, sessionID string) (bool, error)
	// Answer passes an interaction's answer to the Session's runtime.
	Answer(ctx context.Context, sessionID string, a engine.Answer) error
	// Release stops the Session's runtime and deletes its sandbox.
	Release(ctx context.Context, sessionID string) error
}

// Config configures a Service.
type Config struct {
	Store     store.Store
	Sandboxes *lifecycle.Service
	Engines   engine.Registry
	Vault     *vault.Ring
	Log       *stream.Log
	Logger    *slog.Logger
	Now       func() time.Time
}

// Service is the platform's API-facing service. It is safe for concurrent
// use.
type Service struct {
	cfg   Config
	st    store.Store
	log   *slog.Logger
	now   func() time.Time
	waker Waker
}

// New returns a Service; SetWaker must be called before inputs are sent.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Sandboxes == nil || cfg.Log == nil || cfg.Vault == nil {
		return nil, errors.New("platform: store, sandboxes, log and vault are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, st: cfg.Store, log: cfg.Logger, now: cfg.Now}, nil
}

// SetWaker connects the runner manager.
func (s *Service) SetWaker(w Waker) { s.waker = w }

// Log returns the durable log.
func (s *Service) Log() *stream.Log { return s.cfg.Log }

// Engines returns the installed engine adapters.
func (s *Service) Engines() engine.Registry { return s.cfg.Engines }

// Store returns the store.
func (s *Service) Store() store.Store { return s.st }

// Sandboxes returns the sandbox service.
func (s *Service) Sandboxes() *lifecycle.Service { return s.cfg.Sandboxes }

// Vault returns the key ring.
func (s *Service) Vault() *vault.Ring { return s.cfg.Vault }

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// NewID returns prefix + "_" + 24 lower-case base32 characters; ids of one
// kind made later sort after earlier ones within a millisecond's clock
// precision (a time prefix), so lists page in creation order.
func NewID(prefix string, now time.Time) string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 7; i >= 0; i-- { // 8 characters of time: 40 bits of ms
		b[i] = alphabet[ms&31]
		ms >>= 5
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	for i := 0; i < 8; i++ {
		b[8+i] = alphabet[r[i]&31]
	}
	return fmt.Sprintf("%s_%s", prefix, b[:])
}

// invalid returns an INVALID_REQUEST error.
func invalid(format string, args ...any) error { return sandbox.Errorf(CodeInvalid, format, args...) }
