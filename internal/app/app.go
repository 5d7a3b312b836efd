// Package app wires AstraBox's commands together. cmd/astrabox only calls
// Main; tests call it in-process.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// Env looks up environment variables; Main reads the environment only
// through it, so tests can pass their own.
type Env func(key string) string

// IO is where a command reads and writes.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Version is set at build time with -ldflags "-X ...app.Version=...".
var Version = "dev"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, io IO, env Env) error
}

func commands() []command {
	return []command{
		{"serve", "run the AstraBox server (sandbox lifecycle API, proxy, reconciler)", runServe},
		{"sandbox", "create, list, inspect, renew, pause, resume and delete sandboxes", runSandbox},
		{"exec", "run a command in a sandbox: astrabox exec ID -- CMD...", runExec},
		{"cp", "copy files to or from a sandbox: astrabox cp SRC ID:PATH", runCp},
		{"files", "list files in a sandbox: astrabox files ls ID PATH", runFiles},
		{"execd", "run the in-box daemon (commands, files, terminals, ports)", runExecd},
		{"bench", "measure AstraBox and print tables (bench [execd|platform|replicas|remote|egress])", runBench},
		{"uninstall", "remove every box of a data dir and the data dir itself (uninstall --data-dir DIR --yes)", runUninstall},
		{"init", "PID 1 of a native sandbox (started by the native backend, not by hand)", runInit},
		{"kube-init", "init container of a Kubernetes sandbox (started by the kubernetes backend, not by hand)", runKubeInit},
		{"image", "import, pull, list and remove sandbox images", runImage},
		{"volume", "list and remove named volumes (kept across sandboxes)", runVolume},
		{"agent", "manage Agents (agent create|ls|show|rm); with flags only, the built-in agent program", runAgentCommand},
		{"profile", "put, list, show and remove RuntimeProfiles (sandbox and model settings of Agents)", runProfile},
		{"vault", "credential vaults of Agents (vault create|ls|get|rm|set-secret|rm-secret)", runVault},
		{"session", "list, inspect, send to, follow and delete Sessions", runSession},
		{"chat", "chat with an Agent: astrabox chat AGENT [--session ID]", runChat},
		{"version", "print the version", func(_ context.Context, _ []string, io IO, _ Env) error {
			_, err := fmt.Fprintln(io.Stdout, "astrabox", Version)
			return err
		}},
	}
}

// Main runs the command named by args[0] and returns the process exit code.
func Main(ctx context.Context, args []string, stdio IO, env Env) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdio.Stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			if err := c.run(ctx, args[1:], stdio, env); err != nil {
				if ec, ok := err.(exitCoder); ok {
					return ec.ExitCode()
				}
				// An error may quote a box, a model or the server.
				fmt.Fprintf(stdio.Stderr, "astrabox %s: %s\n", c.name, visible(err.Error()))
				return 1
			}
			return 0
		}
	}
	fmt.Fprintf(stdio.Stderr, "astrabox: unknown command %q\n\n", args[0])
	usage(stdio.Stderr)
	return 2
}

// exitCoder is an error that asks for a specific exit code.
type exitCoder interface{ ExitCode() int }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: astrabox <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

// newLogger returns a text logger at the named level.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// OSEnv is Env over the process environment.
func OSEnv(key string) string { return os.Getenv(key) }
