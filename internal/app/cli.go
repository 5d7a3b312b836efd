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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/astrabox/astrabox/api/wire"
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
	fs.StringVar(&c.server, "server", env("ASTRABOX_URL"), "AstraBox server URL ($ASTRABOX_URL; default: the server of the last 'astrabox login' when no key is given, else "+defaultServer+")")
	fs.StringVar(&c.key, "api-key", env("ASTRABOX_API_KEY"), "API key ($ASTRABOX_API_KEY; default: the key 'astrabox login' stored for the server, else the local server's credentials file)")
	fs.StringVar(&c.dataDir, "data-dir", defaultDataDir(env), "data dir of the local server, for its credentials file")
}

// resolve returns the server and the API key a command uses: --server,
// else $ASTRABOX_URL, else the server of the last login, else the local
// one; --api-key, else $ASTRABOX_API_KEY, else the key login stored for
// that server, else the local server's credentials file. A key given
// without a server goes to the local one, as before logins were stored,
// never to the server of the last login.
func (c *connFlags) resolve() (server, key string, err error) {
	server, key = c.server, c.key
	if server == "" && key != "" {
		server = defaultServer
	}
	if server == "" || key == "" {
		creds, path, err := loadCredentials(c.env)
		if err != nil {
			return "", "", err
		}
		if server == "" {
			server = firstNonEmpty(creds.Current, defaultServer)
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

// runSandbox is `astrabox sandbox create|ls|get|rm|renew|pause|resume|endpoint`.
func runSandbox(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) == 0 {
		return errors.New("usage: astrabox sandbox create|ls|get|rm|renew|pause|resume|endpoint [flags]")
	}
	verb, args := args[0], args[1:]
	fs := flag.NewFlagSet("sandbox "+verb, flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	var conn connFlags
	conn.register(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	var (
		image, cpu, memory, profile, backend *string
		timeout, idle                        *int64
		meta, envs                           *pairFlag
		states                               *multiFlag
		expires                              *time.Duration
	)
	switch verb {
	case "create":
		image = fs.String("image", "", "image (default: the profile's)")
		cpu = fs.String("cpu", "", "CPU limit, e.g. 500m")
		memory = fs.String("memory", "", "memory limit, e.g. 512Mi")
		profile = fs.String("profile", "", "runtime profile")
		backend = fs.String("backend", "", "backend")
		timeout = fs.Int64("timeout", 3600, "seconds until the sandbox expires (0: never)")
		idle = fs.Int64("idle-timeout", 0, "seconds of inactivity before deletion (0: never)")
		meta = &pairFlag{}
		fs.Var(meta, "label", "metadata key=value (repeatable)")
		envs = &pairFlag{}
		fs.Var(envs, "env", "environment KEY=VALUE (repeatable)")
	case "ls":
		states = &multiFlag{}
		fs.Var(states, "state", "only this state (repeatable)")
		meta = &pairFlag{}
		fs.Var(meta, "label", "only with metadata key=value (repeatable)")
	case "renew":
		expires = fs.Duration("for", time.Hour, "lifetime from now; an expiry already later is kept")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	rest := fs.Args()
	needID := func() (string, error) {
		if len(rest) != 1 {
			return "", fmt.Errorf("usage: astrabox sandbox %s ID", verb)
		}
		return rest[0], nil
	}
	out := stdio.Stdout
	switch verb {
	case "create":
		if *timeout < 0 || *idle < 0 {
			return errors.New("--timeout and --idle-timeout are seconds: 0 (never) or more")
		}
		req := wire.CreateSandboxRequest{Metadata: meta.pairs(), Env: envs.pairs(), Backend: *backend, ResourceLimits: map[string]string{}}
		if *timeout > 0 {
			req.Timeout = timeout
		}
		if *idle > 0 {
			req.IdleTimeout = idle
		}
		if *image != "" {
			req.Image = &wire.ImageSpec{URI: *image}
		}
		if *cpu != "" {
			req.ResourceLimits["cpu"] = *cpu
		}
		if *memory != "" {
			req.ResourceLimits["memory"] = *memory
		}
		if *profile != "" {
			req.Extensions = map[string]string{"profile": *profile}
		}
		sb, err := c.Create(ctx, req, client.CreateOptions{})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, sb)
		}
		fmt.Fprintln(out, sb.ID)
		return nil
	case "ls":
		list, err := c.List(ctx, client.ListOptions{States: *states, Metadata: meta.pairs(), PageSize: 200})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, list.Items)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATE\tBACKEND\tIMAGE\tCREATED\tEXPIRES")
		for _, sb := range list.Items {
			img, exp := "", "never"
			if sb.Image != nil {
				img = sb.Image.URI
			}
			if sb.ExpiresAt != nil {
				exp = time.Until(*sb.ExpiresAt).Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", sb.ID, sb.Status.State, sb.Backend, visibleField(img), sb.CreatedAt.Local().Format(time.DateTime), exp)
		}
		return tw.Flush()
	case "get":
		id, err := needID()
		if err != nil {
			return err
		}
		sb, err := c.Get(ctx, id)
		if err != nil {
			return err
		}
		return printJSON(out, sb)
	case "rm":
		if len(rest) == 0 {
			return errors.New("usage: astrabox sandbox rm ID [MORE IDS]")
		}
		for _, id := range rest {
			if err := c.Delete(ctx, id); err != nil {
				return err
			}
		}
		return nil
	case "pause", "resume":
		id, err := needID()
		if err != nil {
			return err
		}
		if verb == "pause" {
			return c.Pause(ctx, id)
		}
		return c.Resume(ctx, id)
	case "renew":
		id, err := needID()
		if err != nil {
			return err
		}
		if *expires <= 0 {
			return fmt.Errorf("sandbox renew: --for %s: give a positive duration such as 2h", *expires)
		}
		return renewAtLeast(ctx, c, id, time.Now().Add(*expires), out, stdio.Stderr)
	case "endpoint":
		if len(rest) != 2 {
			return errors.New("usage: astrabox sandbox endpoint ID PORT")
		}
		port, err := strconv.Atoi(rest[1])
		if err != nil {
			return fmt.Errorf("port: %w", err)
		}
		ep, err := c.Endpoint(ctx, rest[0], port)
		if err != nil {
			return err
		}
		return printJSON(out, ep)
	}
	return fmt.Errorf("unknown sandbox command %q", verb)
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
