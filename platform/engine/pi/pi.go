// Package pi is the adapter of engine kind "pi": the pi coding agent
// (npm @mariozechner/pi-coding-agent, pinned in image/pi) run as
// `pi --mode rpc`, a long-lived program that reads JSON commands on stdin
// and prints JSON events on stdout. It needs the pi image (make image-pi).
//
// What the adapter sets up in the box, under a directory of the session's
// own (stateDir):
//   - agent/models.json: one provider "astrabox" whose base URL is
//     AstraBox's model path and whose apiKey names the environment variable
//     holding the session's placeholder credential (pi resolves it there),
//     so the real key never enters the box;
//   - agent/AGENTS.md: the Agent's instructions, as pi's user-level context
//     file, so the workspace (and its own AGENTS.md, which pi still reads)
//     is never written to;
//   - conversation.jsonl: pi's session file (`--session PATH`), the native
//     state the runner mirrors and writes back into replacement compute; pi
//     creates it when it is missing and continues it when it is there.
//
// pi keeps follow-ups queued across an abort and runs them only after the
// next prompt, out of order; so the descriptor says it does not queue
// inputs, and the runner hands it one input at a time. Every prompt still
// carries streamingBehavior "followUp", so one that arrives while pi is
// finishing a reply waits for it instead of being refused.
package pi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/platform/engine"
)

// Kind is the engine kind this adapter serves.
const Kind = "pi"

// Image is the image the program needs: what make image-pi imports.
const Image = "pi"

// Version is the pi release the adapter is written and recorded against.
const Version = "0.73.1"

// Tools are pi's built-in tools; an Agent may narrow them (--tools). With
// no list pi enables read, bash, edit and write.
var Tools = []string{"read", "bash", "edit", "write", "grep", "find", "ls"}

// keyEnv is the environment variable carrying the placeholder credential;
// models.json names it.
const keyEnv = "ASTRABOX_MODEL_KEY"

// stateRequestID is the id of the get_state command written at start; its
// response reports pi's session id (the native key).
const stateRequestID = "astrabox:state"

// provider is the name of the model provider in models.json.
const provider = "astrabox"

func stateDir(sessionID string) string { return "/tmp/.astrabox-pi/" + sessionID }

// Adapter implements engine.Adapter.
type Adapter struct{}

// New returns the adapter.
func New() Adapter { return Adapter{} }

// Descriptor implements engine.Adapter.
func (Adapter) Descriptor() engine.Descriptor {
	return engine.Descriptor{
		Kind:            Kind,
		Title:           "pi coding agent " + Version,
		PermissionModes: []string{"auto"},
		ModelAPI:        "openai-chat",
		StateFormat:     "jsonl",
		Capabilities:    []string{"tools", "reasoning", "interrupt", "resume"},
		Tools:           Tools,
		Image:           Image,
		SerialInputs:    true,
	}
}

// Launch implements engine.Adapter.
func (Adapter) Launch(cfg engine.Config) (engine.Launch, error) {
	if cfg.PermissionMode != "" && cfg.PermissionMode != "auto" {
		return engine.Launch{}, fmt.Errorf("pi: permission mode %q is not supported (pi runs its tools without asking: auto)", cfg.PermissionMode)
	}
	if cfg.SessionID == "" || strings.ContainsAny(cfg.SessionID, "/'\"\\") {
		return engine.Launch{}, fmt.Errorf("pi: invalid session id %q", cfg.SessionID)
	}
	if cfg.Model == "" {
		return engine.Launch{}, fmt.Errorf("pi: a model name is required")
	}
	for _, t := range cfg.Tools {
		if !slices.Contains(Tools, t) {
			return engine.Launch{}, fmt.Errorf("pi: unknown tool %q (tools: %s)", t, strings.Join(Tools, ", "))
		}
	}
	dir := stateDir(cfg.SessionID)
	models, err := modelsJSON(cfg)
	if err != nil {
		return engine.Launch{}, err
	}
	l := engine.Launch{
		Env: map[string]string{
			keyEnv:                cfg.ModelKey,
			"PI_CODING_AGENT_DIR": dir + "/agent",
			"PI_OFFLINE":          "1",
			"PI_TELEMETRY":        "0",
			"NO_COLOR":            "1",
		},
		Files:     []engine.File{{Path: dir + "/agent/models.json", Content: models, Mode: 0o600}},
		StatePath: dir + "/conversation.jsonl",
		Stdin:     []byte(`{"id":"` + stateRequestID + `","type":"get_state"}` + "\n"),
	}
	if cfg.Instructions != "" {
		l.Files = append(l.Files, engine.File{Path: dir + "/agent/AGENTS.md", Content: []byte(cfg.Instructions), Mode: 0o600})
	}
	args := []string{"pi", "--mode", "rpc", "--provider", provider, "--model", engine.ShellQuote(cfg.Model),
		"--session", engine.ShellQuote(l.StatePath), "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes"}
	if cfg.Tools != nil {
		if len(cfg.Tools) == 0 {
			args = append(args, "--no-tools")
		} else {
			args = append(args, "--tools", engine.ShellQuote(strings.Join(cfg.Tools, ",")))
		}
	}
	l.Command = "exec " + strings.Join(args, " ")
	if cfg.Workspace != "" {
		l.Cwd = cfg.Workspace
	}
	return l, nil
}

// modelsJSON is pi's model configuration: AstraBox's model path as the
// only provider. The system prompt goes as a system message and no
// reasoning_effort is sent, which every OpenAI-compatible server accepts.
func modelsJSON(cfg engine.Config) ([]byte, error) {
	m := map[string]any{"providers": map[string]any{provider: map[string]any{
		"baseUrl": cfg.ModelBaseURL,
		"api":     "openai-completions",
		"apiKey":  keyEnv,
		"compat":  map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
		"models":  []any{map[string]any{"id": cfg.Model, "reasoning": true}},
	}}}
	return json.MarshalIndent(m, "", "  ")
}

// EncodeInput implements engine.Adapter. A prompt always says how to wait
// if pi is still busy (see the package comment).
func (Adapter) EncodeInput(in engine.Input) ([]byte, error) {
	return engine.JSONLine(map[string]any{"id": in.ID, "type": "prompt", "message": in.Content, "streamingBehavior": "followUp"})
}

// EncodeInterrupt implements engine.Adapter.
func (Adapter) EncodeInterrupt() ([]byte, error) {
	return engine.JSONLine(map[string]any{"type": "abort"})
}

// EncodeAnswer implements engine.Adapter: pi opens no interactions.
func (Adapter) EncodeAnswer(engine.Answer) ([]byte, error) {
	return nil, fmt.Errorf("pi: the pi agent asks no approvals or questions")
}

// NewDecoder implements engine.Adapter.
func (Adapter) NewDecoder() engine.Decoder { return newDecoder() }
