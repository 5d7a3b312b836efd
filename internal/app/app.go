// Package app wires AstraBox's commands together. cmd/astrabox only calls
// Main; tests call it in-process.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/sandbox"
)

// Env looks up environment variables; Main reads the environment only
// through it, so tests can pass their own.
type Env func(key string) string

// IO is where a command reads and writes.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// OpenBrowser, when set, opens a URL in the user's browser for
	// `astrabox login --browser` (tests play the browser with it); nil
	// runs $ASTRABOX_BROWSER, else the system's opener.
	OpenBrowser func(url string) error
}

// Version is set at build time with -ldflags "-X ...app.Version=...".
var Version = "dev"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, io IO, env Env) error
	// verbs lists the sub-commands of a command that has them, each with
	// what it does: `astrabox NAME --help` prints them (each sub-command's
	// own --help prints its flags).
	verbs [][2]string
}

func commands() []command {
	return []command{
		{"serve", "run the AstraBox server (sandbox lifecycle API, proxy, reconciler)", runServe, nil},
		{"sandbox", "create, list, inspect, renew, pause, resume and delete sandboxes", runSandbox, [][2]string{
			{"create", "create a sandbox and print its id"}, {"ls", "list sandboxes (by state, by label)"},
			{"get", "show a sandbox"}, {"rm", "delete a sandbox"}, {"pause", "pause a sandbox"}, {"resume", "resume a paused sandbox"},
			{"renew", "move a sandbox's expiry (--for 2h)"}, {"endpoint", "where a port of a sandbox is reached, and the header to send"}}},
		{"exec", "run a command in a sandbox: astrabox exec ID -- CMD...", runExec, nil},
		{"cp", "copy files to or from a sandbox: astrabox cp SRC ID:PATH", runCp, nil},
		{"files", "list files in a sandbox: astrabox files ls ID PATH", runFiles, [][2]string{{"ls", "list a directory of a sandbox: files ls ID PATH"}}},
		{"execd", "run the in-box daemon (commands, files, terminals, ports)", runExecd, nil},
		{"bench", "measure AstraBox and print tables (bench [execd|platform|replicas|restart|remote|egress|auth])", runBench, [][2]string{
			{"(none)", "sandbox lifecycle scenarios across backends"}, {"execd", "execd's own costs against the raw host"},
			{"platform", "the agent platform's reply path"}, {"replicas", "replicas on PostgreSQL"},
			{"restart", "a server's stop during replies"},
			{"remote", "a remote lifecycle service"}, {"egress", "the egress proxy of network limited"}, {"auth", "authentication per request"}}},
		{"uninstall", "remove every box of a data dir and the data dir itself (uninstall --data-dir DIR --yes)", runUninstall, nil},
		{"init", "PID 1 of a native sandbox (started by the native backend, not by hand)", runInit, [][2]string{
			{"(none)", "takes no arguments: the native backend starts it with its configuration"}}},
		{"kube-init", "init container of a Kubernetes sandbox (started by the kubernetes backend, not by hand)", runKubeInit, nil},
		{"image", "import, pull, list and remove sandbox images", runImage, [][2]string{
			{"import", "import a rootfs tarball as an image"}, {"pull", "pull an image from a registry"},
			{"ls|list", "list images"}, {"rm|remove", "remove an image"}, {"prune", "remove images no sandbox uses"}}},
		{"volume", "list and remove named volumes (kept across sandboxes)", runVolume, [][2]string{
			{"ls", "list named volumes"}, {"rm", "remove a named volume"}}},
		{"agent", "manage Agents (agent create|ls|show|rm); with flags only, the built-in agent program", runAgentCommand, [][2]string{
			{"create", "create an Agent"}, {"ls", "list Agents"}, {"show", "show an Agent"}, {"rm", "delete an Agent"},
			{"--state FILE ...", "run the built-in agent program itself (what a sandbox runs; its flags: agent --state x --help)"}}},
		{"profile", "put, list, show and remove RuntimeProfiles (sandbox and model settings of Agents)", runProfile, [][2]string{
			{"put", "create or replace a RuntimeProfile"}, {"ls", "list RuntimeProfiles"}, {"show", "show a RuntimeProfile"},
			{"rm", "delete a RuntimeProfile"}}},
		{"vault", "credential vaults of Agents (vault create|ls|get|rm|set-secret|rm-secret)", runVault, [][2]string{
			{"create", "create a vault"}, {"ls", "list vaults"}, {"get|show", "show a vault (never a value)"}, {"rm", "delete a vault"},
			{"set-secret", "add or replace a secret of a vault"}, {"rm-secret", "remove a secret of a vault"}}},
		{"session", "list, inspect, send to, follow and delete Sessions", runSession, [][2]string{
			{"ls", "list Sessions"}, {"show", "show a Session (--messages: its conversation)"}, {"send", "send an input to a Session"},
			{"follow", "follow a Session's log"}, {"rm", "delete a Session"}}},
		{"chat", "chat with an Agent: astrabox chat AGENT [--session ID]", runChat, nil},
		{"login", "store an API key for a server, once it accepts it (login [--server URL] [--key KEY | --browser])", runLogin, nil},
		{"logout", "remove the stored key of a server (logout [--server URL | --all])", runLogout, nil},
		{"whoami", "show who your key acts as: user, role, kind, scopes and key id", runWhoami, nil},
		{"user", "manage users: list, add, change roles, disable and enable (administrators)", runUser, [][2]string{
			{"ls", "list users"}, {"show", "show a user"}, {"add", "add a user: add [ID] --role ROLE [--kind service|human ...]"},
			{"set-role", "change a user's role: set-role ID admin|member|viewer"}, {"disable", "disable users: their keys stop working"},
			{"enable", "enable disabled users"}}},
		{"key", "create, list and revoke API keys, your own or (--user ID) a user's", runKey, [][2]string{
			{"create", "create a key and print it, once"}, {"ls", "list keys"}, {"revoke", "revoke keys"}}},
		{"audit", "show the audit log, newest first (administrators; by --actor, --action, --target, --since)", runAudit, nil},
		{"version", "print the version", func(_ context.Context, _ []string, io IO, _ Env) error {
			_, err := fmt.Fprintln(io.Stdout, "astrabox", Version)
			return err
		}, nil},
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
			if len(c.verbs) > 0 && len(args) == 2 && isHelp(args[1]) {
				c.usage(stdio.Stdout)
				return 0
			}
			if len(args) > 1 && !c.knows(args[1]) {
				fmt.Fprintf(stdio.Stderr, "astrabox %s: unknown command %q\n\n", c.name, args[1])
				c.usage(stdio.Stderr)
				return 2
			}
			if err := c.run(ctx, args[1:], stdio, env); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return 0 // the flag set printed the usage asked for
				}
				if ec, ok := err.(exitCoder); ok {
					return ec.ExitCode()
				}
				// An error may quote a box, a model or the server.
				fmt.Fprintf(stdio.Stderr, "astrabox %s: %s\n", c.name, visible(errorText(err)))
				return 1
			}
			return 0
		}
	}
	fmt.Fprintf(stdio.Stderr, "astrabox: unknown command %q\n\n", args[0])
	usage(stdio.Stderr)
	return 2
}

// errorText is what the CLI says of err: without the SDK's own
// "astrabox: " prefix (the command's name already leads the line), and
// with what to do when no server answered.
func errorText(err error) string {
	msg := strings.TrimPrefix(err.Error(), "astrabox: ")
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		msg += " (is the server running? start it with 'astrabox serve', or point ASTRABOX_URL at it)"
	case errors.Is(err, errKeyRefused):
		// login says what it did with the key it was given.
	case client.CodeOf(err) == sandbox.CodeUnauthorized:
		msg += " (log in with 'astrabox login', or give --api-key or set ASTRABOX_API_KEY)"
	case client.CodeOf(err) == "TOKEN_EXPIRED":
		msg += " (make a new key and log in with it: 'astrabox login')"
	}
	return msg
}

// isHelp reports an argument that asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// knows reports whether arg may follow c's name: a flag, or one of c's
// sub-commands (any word when c has none).
func (c command) knows(arg string) bool {
	if len(c.verbs) == 0 || strings.HasPrefix(arg, "-") {
		return true
	}
	for _, v := range c.verbs {
		if slices.Contains(strings.Split(v[0], "|"), arg) {
			return true
		}
	}
	return false
}

// usage prints c's sub-commands.
func (c command) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: astrabox %s <command> [flags]\n\n%s\n\ncommands:\n", c.name, c.summary)
	for _, v := range c.verbs {
		fmt.Fprintf(w, "  %-12s %s\n", v[0], v[1])
	}
	fmt.Fprintf(w, "\n'astrabox %s <command> --help' shows a command's flags.\n", c.name)
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
