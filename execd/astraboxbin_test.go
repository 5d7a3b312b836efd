package execd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/execd"
	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
)

// printBin prints the variable and nothing else, so an unset one prints "".
const printBin = `printf '%s' "$` + wire.EnvAstraboxBin + `"`

// selfExecutable is what execd, running in this test binary, resolves as
// its own executable.
func selfExecutable(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestAstraboxBin checks that every kind of process execd starts finds
// execd's executable in ASTRABOX_BIN, and that a request may set its own.
func TestAstraboxBin(t *testing.T) {
	self := selfExecutable(t)
	link := filepath.Join(t.TempDir(), "astrabox")
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		baseEnv []string // execd's base environment, besides PATH
		// run starts the process through c and returns what it printed.
		run  func(t *testing.T, c *client.Client) string
		want string
	}{
		{
			name: "command",
			run:  func(t *testing.T, c *client.Client) string { return runPrint(t, c, nil) },
			want: self,
		},
		{
			name:    "command, replacing an inherited value that is not execd",
			baseEnv: []string{wire.EnvAstraboxBin + "=/stale/astrabox"},
			run:     func(t *testing.T, c *client.Client) string { return runPrint(t, c, nil) },
			want:    self,
		},
		{
			name:    "command, keeping an inherited value that names execd",
			baseEnv: []string{wire.EnvAstraboxBin + "=" + link},
			run:     func(t *testing.T, c *client.Client) string { return runPrint(t, c, nil) },
			want:    link,
		},
		{
			name: "command that sets the variable itself",
			run: func(t *testing.T, c *client.Client) string {
				return runPrint(t, c, map[string]string{wire.EnvAstraboxBin: "/opt/custom/astrabox"})
			},
			want: "/opt/custom/astrabox",
		},
		{
			name: "session",
			run: func(t *testing.T, c *client.Client) string {
				ctx := testCtx(t)
				id, err := c.CreateSession(ctx, "")
				if err != nil {
					t.Fatalf("create session: %v", err)
				}
				t.Cleanup(func() { _ = c.DeleteSession(testCtx(t), id) })
				ex, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: printBin})
				if err != nil || ex.ExitCode != 0 {
					t.Fatalf("run in session: %+v, %v", ex, err)
				}
				return string(ex.Stdout)
			},
			want: self,
		},
		{
			name: "terminal",
			run: func(t *testing.T, c *client.Client) string {
				ctx := ptyCtx(t)
				id, err := c.CreatePTY(ctx, wire.CreatePTYRequest{Command: printBin})
				if err != nil {
					t.Fatalf("create pty: %v", err)
				}
				r := ptyAttach(t, ctx, c, id, client.AttachOptions{Pipe: true})
				r.until(t, ctx, "the exit frame", func() bool { return r.exit != nil })
				return r.stdout.String()
			},
			want: self,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c := startCommandServer(t, execd.Config{Env: tc.baseEnv})
			if got := tc.run(t, c); got != tc.want {
				t.Fatalf("%s = %q, want %q", wire.EnvAstraboxBin, got, tc.want)
			}
		})
	}
}

// TestAstraboxBinIsExecutable checks the path is one a command can run.
func TestAstraboxBinIsExecutable(t *testing.T) {
	_, c := startCommandServer(t, execd.Config{})
	ex, err := c.Run(testCtx(t), wire.RunCommandRequest{Command: `test -x "$` + wire.EnvAstraboxBin + `" && echo runnable`})
	if err != nil {
		t.Fatal(err)
	}
	if ex.ExitCode != 0 || strings.TrimSpace(string(ex.Stdout)) != "runnable" {
		t.Fatalf("test -x $%s: exit %d, stdout %q, stderr %q", wire.EnvAstraboxBin, ex.ExitCode, ex.Stdout, ex.Stderr)
	}
}

// runPrint runs printBin as a command with envs and returns its stdout.
func runPrint(t *testing.T, c *client.Client, envs map[string]string) string {
	t.Helper()
	ex, err := c.Run(testCtx(t), wire.RunCommandRequest{Command: printBin, Envs: envs})
	if err != nil || ex.ExitCode != 0 {
		t.Fatalf("run: %+v, %v", ex, err)
	}
	return string(ex.Stdout)
}
