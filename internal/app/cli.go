package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/astrabox/astrabox/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
)

// connFlags are the flags every client command takes.
type connFlags struct {
	server, key, dataDir string
	env                  Env
}

// defaultServer is the server of a command given none.
const defaultServer = "http://127.0.0.1:8080"

func (c *connFlags) register(fs *flag.FlagSet, env Env) {
	c.env = env
	fs.StringVar(&c.server, "server", env("ASTRABOX_URL"), "AstraBox server URL ($ASTRABOX_URL; default: the server of the last 'astrabox login' when no key is given, else the local server of --data-dir, on the port it recorded, else "+defaultServer+")")
	fs.StringVar(&c.key, "api-key", env("ASTRABOX_API_KEY"), "API key ($ASTRABOX_API_KEY; default: the key 'astrabox login' stored for the server, else the local server's credentials file)")
	fs.StringVar(&c.dataDir, "data-dir", defaultDataDir(env), "data dir of the local server, for its credentials file")
}

// resolve returns the server and the API key a command uses: --server,
// else $ASTRABOX_URL, else the server of the last login, else the local
// one (where the server of --data-dir recorded it listens); --api-key, else $ASTRABOX_API_KEY, else the key login stored for
// that server, else the local server's credentials file. A key given
// without a server goes to the local one, as before logins were stored,
// never to the server of the last login.
func (c *connFlags) resolve() (server, key string, err error) {
	server, key = c.server, c.key
	if server == "" && key != "" {
		server = localServerURL(c.dataDir)
	}
	if server == "" || key == "" {
		creds, path, err := loadCredentials(c.env)
		if err != nil {
			return "", "", err
		}
		if server == "" {
			server = firstNonEmpty(creds.Current, localServerURL(c.dataDir))
		}
		if key == "" {
			if e, ok := creds.Servers[serverKey(server)]; ok && e.APIKey != "" {
				return server, e.APIKey, nil
			}
			b, ferr := os.ReadFile(filepath.Join(c.dataDir, "credentials"))
			if ferr != nil {
				login := "run 'astrabox login --server " + server + "'"
				if path == "" {
					login = "set HOME to use 'astrabox login'"
				}
				return "", "", fmt.Errorf("no API key for %s: %s, give --api-key or set ASTRABOX_API_KEY (no local credentials: %w)", server, login, ferr)
			}
			key = strings.TrimSpace(string(b))
		}
	}
	return server, key, nil
}

func (c *connFlags) client() (*client.Client, error) {
	server, key, err := c.resolve()
	if err != nil {
		return nil, err
	}
	return client.New(server, key), nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// runExec is `astrabox exec ID -- CMD...`: it streams the output and exits
// with the command's exit code; with --background it starts the command
// detached and prints its id.
func runExec(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	var conn connFlags
	conn.register(fs, env)
	cwd := fs.String("cwd", "", "working directory")
	timeoutMs := fs.Int64("timeout", 0, "kill the command after this many milliseconds")
	tty := fs.Bool("tty", false, "run on a terminal, interactively (default command: the box's shell)")
	background := fs.Bool("background", false, "start the command detached (a server, say) and print its id; it keeps running after exec returns")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) < 1 || (len(rest) < 2 && !*tty) || (*tty && *background) {
		return errors.New("usage: astrabox exec [--tty | --background] ID [--] COMMAND [ARG]")
	}
	id, argv := rest[0], rest[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	x, err := c.Execd(ctx, id)
	if err != nil {
		return err
	}
	if *tty {
		return runTTY(ctx, x, argv, stdio)
	}
	if len(argv) == 0 {
		return errors.New("usage: astrabox exec ID [--] COMMAND [ARG]")
	}
	if *background {
		ex, err := x.Run(ctx, execdwire.RunCommandRequest{Command: shellJoin(argv), Cwd: *cwd, Timeout: *timeoutMs, Background: true})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdio.Stdout, ex.ID)
		return err
	}
	exit := 0
	err = x.RunStream(ctx, execdwire.RunCommandRequest{Command: shellJoin(argv), Cwd: *cwd, Timeout: *timeoutMs, KillOnDisconnect: true},
		func(ev execdEvent) error {
			switch ev.Type {
			case execdwire.EventStdout:
				_, err := io.WriteString(stdio.Stdout, ev.Text)
				return err
			case execdwire.EventStderr:
				_, err := io.WriteString(stdio.Stderr, ev.Text)
				return err
			case execdwire.EventError, execdwire.EventComplete:
				// A failed command's error event carries its exit code too
				// (the only one in OpenSandbox's framing).
				if ev.ExitCode != nil {
					exit = *ev.ExitCode
				}
			}
			return nil
		})
	if err != nil {
		return err
	}
	if exit != 0 {
		return exitCode(exit)
	}
	return nil
}

// shellJoin quotes argv for `sh -c`.
func shellJoin(argv []string) string {
	if len(argv) == 1 {
		return argv[0] // a single argument is taken as a shell command line
	}
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// printJSON prints v as indented JSON, escaping what would control a
// terminal (visibleJSON).
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(visibleJSON(b), '\n'))
	return err
}

// multiFlag collects repeated key=value flags.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// pairFlag is a repeatable KEY=VALUE flag: a value without "=" or with an
// empty key is refused (an empty VALUE is one, KEY= says so).
type pairFlag struct{ multiFlag }

func (p *pairFlag) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	return p.multiFlag.Set(v)
}

func (m *multiFlag) pairs() map[string]string {
	if m == nil || len(*m) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, kv := range *m {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}
