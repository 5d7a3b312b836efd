// Package agent is AstraBox's built-in agent program (`astrabox agent`): it
// reads JSONL commands on stdin, answers each input with an OpenAI Chat
// Completions model that can call tools in a workspace, writes JSONL events
// on stdout and keeps the conversation in an append-only JSONL file, from
// which a restarted program resumes. docs/agent-protocol.md is the
// contract.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"time"
)

// Permission modes.
const (
	// PermissionAuto runs every tool call.
	PermissionAuto = "auto"
	// PermissionAsk asks approval for shell, write_file and edit_file.
	PermissionAsk = "ask"
)

// DefaultShellTimeout is the shell tool's timeout when Config.ShellTimeout
// is zero.
const DefaultShellTimeout = 120 * time.Second

// maxSteps bounds the model calls of one reply.
const maxSteps = 50

// Config configures Run. The caller reads flags and the environment; this
// package reads neither.
type Config struct {
	// StatePath is the conversation file (required). An existing file is
	// read at start and the conversation continues from it.
	StatePath string
	// Workspace is the tools' working directory (required; created if
	// missing). Relative tool paths resolve in it.
	Workspace string
	// PermissionMode is PermissionAuto (the default when empty) or
	// PermissionAsk.
	PermissionMode string
	// Tools is the subset of Tools() offered to the model; nil means all,
	// an empty slice none.
	Tools []string
	// Instructions are appended to the system prompt.
	Instructions string
	// ModelURL is the base URL of an OpenAI-compatible API (required);
	// requests go to ModelURL + "/chat/completions".
	ModelURL string
	// ModelKey is sent as "Authorization: Bearer <key>" when not empty.
	// It never appears in an event or a log line.
	ModelKey string
	// Model is the model name sent in each request.
	Model string
	// ShellTimeout is the shell tool's default timeout (zero:
	// DefaultShellTimeout).
	ShellTimeout time.Duration
	// ConnectAttempts bounds the tries to connect to the model before any
	// answer (zero: 12, about 20 s, which rides out a server restart).
	ConnectAttempts int
	// BrokenRetries bounds how often in a row a model call that broke off
	// (its stream cut, the model path unreachable) is made again (zero:
	// 6, about two minutes with the pauses and connection attempts;
	// negative: never). BrokenPause is the first pause before it,
	// doubling up to 8 s (zero: a second).
	BrokenRetries int
	BrokenPause   time.Duration
	// HTTPClient makes the model requests (nil: http.DefaultClient). It
	// should have no overall timeout: a reply streams for as long as the
	// model writes.
	HTTPClient *http.Client
	// Logger receives diagnostics (nil: none). They are also written as
	// "log" events.
	Logger *slog.Logger
}

// Run runs the agent until stdin ends and every input it queued has been
// answered (then it returns nil), or until ctx ends: the reply in progress
// then ends as interrupted and Run returns ctx's error. It returns an error
// at once when cfg is invalid or the conversation file cannot be opened,
// and as soon as an event cannot be written to stdout.
//
// Run does not close stdin. A stdin read that is still blocked when Run
// returns is abandoned; the goroutine doing it exits when the read
// returns, and writes nothing more.
func Run(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer) error {
	a, err := newAgent(cfg, stdout)
	if err != nil {
		return err
	}
	defer a.close()
	if err := a.start(); err != nil {
		return err
	}
	go a.readCommands(stdin)
	return a.work(ctx)
}

// validate checks cfg and fills in its defaults.
func (cfg *Config) validate() error {
	if cfg.StatePath == "" {
		return errors.New("state path is required")
	}
	if cfg.Workspace == "" {
		return errors.New("workspace is required")
	}
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	cfg.Workspace = ws
	switch cfg.PermissionMode {
	case "":
		cfg.PermissionMode = PermissionAuto
	case PermissionAuto, PermissionAsk:
	default:
		return fmt.Errorf("permission mode %q: want %s or %s", cfg.PermissionMode, PermissionAuto, PermissionAsk)
	}
	u, err := url.Parse(cfg.ModelURL)
	if cfg.ModelURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("model URL is required and must be an http or https URL")
	}
	if cfg.ShellTimeout <= 0 {
		cfg.ShellTimeout = DefaultShellTimeout
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// newID returns prefix_ and 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return prefix + "_" + hex.EncodeToString(b[:])
}
