// Package astrabox is the adapter of engine kind "astrabox": the built-in
// agent (`astrabox agent`, docs/agent-protocol.md) that ships inside the
// AstraBox binary, so it runs in any image with no image work.
package astrabox

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/wire"
)

// Kind is the engine kind this adapter serves.
const Kind = "astrabox"

// Tools are the built-in agent's tools.
var Tools = []string{"shell", "read_file", "write_file", "edit_file", "list_dir", "search"}

// stateDir holds a session's conversation file and instructions in the
// box: outside the workspace, so the agent's own listings do not show it,
// and named by the session, so boxes sharing a /tmp (the test-only
// process backend) never mix them.
func stateDir(sessionID string) string { return "/tmp/.astrabox-agent/" + sessionID }

// Adapter implements engine.Adapter.
type Adapter struct{}

// New returns the adapter.
func New() Adapter { return Adapter{} }

// Descriptor implements engine.Adapter.
func (Adapter) Descriptor() engine.Descriptor {
	return engine.Descriptor{
		Kind:            Kind,
		Title:           "AstraBox agent (built in)",
		PermissionModes: []string{"auto", "ask"},
		ModelAPI:        "openai-chat",
		StateFormat:     "jsonl",
		Capabilities:    []string{"tools", "approvals", "reasoning", "interrupt", "resume"},
		Tools:           Tools,
	}
}

// Launch implements engine.Adapter.
func (Adapter) Launch(cfg engine.Config) (engine.Launch, error) {
	mode := cfg.PermissionMode
	if mode == "" {
		mode = "auto"
	}
	if mode != "auto" && mode != "ask" {
		return engine.Launch{}, fmt.Errorf("astrabox: permission mode %q is not auto or ask", mode)
	}
	if cfg.SessionID == "" || strings.ContainsAny(cfg.SessionID, "/'\"\\") {
		return engine.Launch{}, fmt.Errorf("astrabox: invalid session id %q", cfg.SessionID)
	}
	// Without a workspace the agent works in execd's working directory
	// (the box's /workspace).
	ws := `"$PWD"`
	if cfg.Workspace != "" {
		ws = engine.ShellQuote(cfg.Workspace)
	}
	dir := stateDir(cfg.SessionID)
	statePath := dir + "/conversation.jsonl"
	args := []string{`"${ASTRABOX_BIN:-/.astrabox/astrabox}"`, "agent", "--state", engine.ShellQuote(statePath),
		"--workspace", ws, "--permission-mode", mode}
	if cfg.Tools != nil {
		for _, t := range cfg.Tools {
			if !slices.Contains(Tools, t) {
				return engine.Launch{}, fmt.Errorf("astrabox: unknown tool %q (tools: %s)", t, strings.Join(Tools, ", "))
			}
		}
		args = append(args, "--tools", engine.ShellQuote(strings.Join(cfg.Tools, ",")))
	}
	l := engine.Launch{
		Env: map[string]string{
			"ASTRABOX_MODEL_URL": cfg.ModelBaseURL,
			"ASTRABOX_MODEL_KEY": cfg.ModelKey,
			"ASTRABOX_MODEL":     cfg.Model,
		},
		StatePath: statePath,
	}
	if cfg.Instructions != "" {
		instructions := dir + "/instructions.md"
		l.Files = append(l.Files, engine.File{Path: instructions, Content: []byte(cfg.Instructions), Mode: 0o600})
		args = append(args, "--instructions-file", engine.ShellQuote(instructions))
	}
	l.Command = "mkdir -p " + engine.ShellQuote(path.Dir(statePath)) + " && exec " + strings.Join(args, " ")
	return l, nil
}

// EncodeInput implements engine.Adapter; the agent queues inputs itself,
// so Busy needs no other form.
func (Adapter) EncodeInput(in engine.Input) ([]byte, error) {
	return engine.JSONLine(map[string]any{"type": "input", "id": in.ID, "content": in.Content})
}

// EncodeInterrupt implements engine.Adapter.
func (Adapter) EncodeInterrupt() ([]byte, error) {
	return engine.JSONLine(map[string]any{"type": "interrupt"})
}

// EncodeAnswer implements engine.Adapter.
func (Adapter) EncodeAnswer(a engine.Answer) ([]byte, error) {
	if a.Decision != string(wire.DecisionApprove) && a.Decision != string(wire.DecisionReject) {
		return nil, fmt.Errorf("astrabox: the built-in agent only asks approvals (decision approve or reject)")
	}
	return engine.JSONLine(map[string]any{"type": "answer", "interaction_id": a.InteractionID, "decision": a.Decision, "comment": a.Comment})
}

// NewDecoder implements engine.Adapter.
func (Adapter) NewDecoder() engine.Decoder { return &decoder{} }
