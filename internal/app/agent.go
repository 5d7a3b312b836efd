package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/astrabox/astrabox/internal/agent"
)

// runAgent is `astrabox agent`: the built-in agent program, speaking the
// JSONL protocol of docs/agent-protocol.md on stdin and stdout. The model
// endpoint comes from ASTRABOX_MODEL_URL, ASTRABOX_MODEL_KEY and
// ASTRABOX_MODEL. A signal ends it cleanly (the reply in progress ends as
// interrupted).
func runAgent(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	state := fs.String("state", "", "the conversation file (JSONL, append-only); an existing one is resumed (required)")
	workspace := fs.String("workspace", "/workspace", "working directory of tools (created if missing)")
	mode := fs.String("permission-mode", agent.PermissionAuto, "auto runs every tool; ask asks approval for shell, write_file and edit_file")
	var tools []string
	fs.Func("tools", "comma-separated subset of the tools "+strings.Join(agent.Tools(), ",")+" (default: all)", func(v string) error {
		tools = []string{}
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tools = append(tools, t)
			}
		}
		return nil
	})
	instructionsFile := fs.String("instructions-file", "", "text appended to the system prompt")
	shellTimeout := fs.Duration("shell-timeout", agent.DefaultShellTimeout, "default timeout of a shell tool call")
	logLevel := fs.String("log-level", "info", "level of the diagnostics written to stderr: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *state == "" {
		return errors.New("--state is required")
	}
	if err := keepProgramPrivate(); err != nil {
		return err
	}
	log, err := newLogger(stdio.Stderr, *logLevel)
	if err != nil {
		return err
	}
	var instructions string
	if *instructionsFile != "" {
		b, err := os.ReadFile(*instructionsFile)
		if err != nil {
			return fmt.Errorf("read instructions: %w", err)
		}
		instructions = string(b)
	}
	err = agent.Run(ctx, agent.Config{
		StatePath:      *state,
		Workspace:      *workspace,
		PermissionMode: *mode,
		Tools:          tools,
		Instructions:   instructions,
		ModelURL:       env("ASTRABOX_MODEL_URL"),
		ModelKey:       env("ASTRABOX_MODEL_KEY"),
		Model:          env("ASTRABOX_MODEL"),
		ShellTimeout:   *shellTimeout,
		Logger:         log,
	}, stdio.Stdin, stdio.Stdout)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // stopped by a signal
	}
	return err
}
