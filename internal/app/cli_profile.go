package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/sandbox"
)

// runProfile is `astrabox profile put|ls|show|rm`: RuntimeProfiles with
// the agent platform's fields. put creates or replaces the whole profile
// (flags not given are left unset), except that a model endpoint given
// without a key keeps the stored key. The model key is never printed.
func runProfile(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) == 0 {
		return errors.New("usage: astrabox profile put|ls|show|rm [flags]")
	}
	return userError(runProfileVerb(ctx, args[0], args[1:], stdio, env))
}

// profileFlags are the flags of `profile put`.
type profileFlags struct {
	backend, image, network    string
	modelURL, modelKey, keyEnv string
	models, engineKinds        commaList
	idleTimeout                string
	poolSize                   int
	version                    int64
	persistentWorkspace        bool
}

func runProfileVerb(ctx context.Context, verb string, args []string, stdio IO, env Env) error {
	var conn connFlags
	fs := verbFlags("profile "+verb, stdio, env, &conn)
	asJSON := fs.Bool("json", false, "print JSON")
	var f profileFlags
	if verb == "put" {
		fs.StringVar(&f.backend, "backend", "", "backend of the profile's sandboxes (default: the server's)")
		fs.StringVar(&f.image, "image", "", "image of the profile's sandboxes")
		fs.StringVar(&f.network, "network", "", "network mode: none, limited or unrestricted")
		fs.StringVar(&f.modelURL, "model-url", "", "base URL of the OpenAI-compatible model endpoint, e.g. https://api.openai.com/v1")
		fs.StringVar(&f.modelKey, "model-key", "", "the endpoint's API key (- reads it from stdin; prefer --model-key-env)")
		fs.StringVar(&f.keyEnv, "model-key-env", "", "read the endpoint's API key from this environment variable")
		fs.Var(&f.models, "models", "comma-separated model names Agents may use (default: any)")
		fs.Var(&f.engineKinds, "engine-kinds", "comma-separated agent programs that may use the profile (default: any)")
		fs.StringVar(&f.idleTimeout, "idle-timeout", "", "release an idle sandbox after this long (10m, or seconds); unset or 0: an agent Session's box gets the server's default (30m), a plain sandbox none")
		fs.IntVar(&f.poolSize, "pool-size", 0, "ready sandboxes to keep warm")
		fs.Int64Var(&f.version, "if-version", 0, "replace only this version of the profile (VERSION_CONFLICT otherwise)")
		fs.BoolVar(&f.persistentWorkspace, "persistent-workspace", false, "keep /workspace across the profile's sandboxes")
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	out := stdio.Stdout
	switch verb {
	case "put":
		if len(rest) != 1 {
			return errors.New("usage: astrabox profile put NAME [flags]")
		}
		p, err := f.profile(rest[0], stdio.Stdin, env)
		if err != nil {
			return err
		}
		stored, err := c.PutRuntimeProfile(ctx, p)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, stored)
		}
		_, err = fmt.Fprintln(out, describeProfile(stored))
		return err
	case "ls":
		ps, err := c.ListRuntimeProfiles(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, ps)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tBACKEND\tIMAGE\tENGINES\tMODEL URL\tMODELS\tKEY\tVERSION")
		for _, p := range ps {
			url, models, key := "", "", "-"
			if p.Model != nil {
				url, models = p.Model.BaseURL, strings.Join(p.Model.Models, ",")
			}
			if p.APIKeySet {
				key = "set"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", p.Name, p.Backend, p.Image, strings.Join(p.EngineKinds, ","), url, models, key, p.Version)
		}
		return tw.Flush()
	case "show":
		if len(rest) != 1 {
			return errors.New("usage: astrabox profile show NAME")
		}
		p, err := c.GetRuntimeProfile(ctx, rest[0])
		if err != nil {
			return err
		}
		return printJSON(out, p)
	case "rm":
		if len(rest) == 0 {
			return errors.New("usage: astrabox profile rm NAME [MORE]")
		}
		for _, name := range rest {
			if err := c.DeleteRuntimeProfile(ctx, name); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown profile command %q", verb)
}

// profile builds the profile the flags describe.
func (f *profileFlags) profile(name string, stdin io.Reader, env Env) (client.RuntimeProfile, error) {
	p := client.RuntimeProfile{Name: name, Backend: f.backend, Image: f.image, Network: sandbox.NetworkMode(f.network),
		PoolSize: f.poolSize, EngineKinds: f.engineKinds, Version: f.version}
	if f.persistentWorkspace {
		p.Workspace = &client.Workspace{Persistent: true}
	}
	if f.idleTimeout != "" {
		secs, err := parseSeconds(f.idleTimeout)
		if err != nil {
			return p, fmt.Errorf("--idle-timeout: %w", err)
		}
		p.IdleTimeoutSeconds = secs
	}
	key, err := f.key(stdin, env)
	if err != nil {
		return p, err
	}
	if f.modelURL == "" {
		if key != "" || len(f.models) > 0 {
			return p, errors.New("--model-key and --models need --model-url")
		}
		return p, nil
	}
	p.Model = &client.ModelEndpoint{BaseURL: f.modelURL, APIKey: key, Models: f.models}
	return p, nil
}

// key returns the model key from --model-key or --model-key-env.
func (f *profileFlags) key(stdin io.Reader, env Env) (string, error) {
	switch {
	case f.modelKey != "" && f.keyEnv != "":
		return "", errors.New("give --model-key or --model-key-env, not both")
	case f.keyEnv != "":
		k := env(f.keyEnv)
		if k == "" {
			return "", fmt.Errorf("--model-key-env: $%s is empty or not set", f.keyEnv)
		}
		return k, nil
	case f.modelKey == "-":
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read the model key from stdin: %w", err)
		}
		if line = strings.TrimSpace(line); line == "" {
			return "", errors.New("--model-key -: stdin held no key")
		}
		return line, nil
	}
	return f.modelKey, nil
}

// parseSeconds reads a duration ("10m") or a number of seconds.
func parseSeconds(v string) (int64, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d%time.Second != 0 {
		return 0, fmt.Errorf("%q is not a whole number of seconds or a duration such as 10m", v)
	}
	return int64(d / time.Second), nil
}

// describeProfile is a one-line summary of a stored profile (which never
// holds the key), with when an idle Session's box is released: after the
// profile's idle timeout, or else after the server's default (30 minutes
// unless the server is configured otherwise; the box is deleted and the
// next message brings a new one).
func describeProfile(p client.RuntimeProfile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (version %d)", p.Name, p.Version)
	if p.Backend != "" {
		fmt.Fprintf(&b, " backend %s", p.Backend)
	}
	if p.Image != "" {
		fmt.Fprintf(&b, " image %s", p.Image)
	}
	if p.IdleTimeoutSeconds > 0 {
		fmt.Fprintf(&b, " idle release %s", time.Duration(p.IdleTimeoutSeconds)*time.Second)
	} else {
		b.WriteString(" idle release: the server's default for Sessions")
	}
	if p.Model != nil {
		fmt.Fprintf(&b, " model %s", p.Model.BaseURL)
		if len(p.Model.Models) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(p.Model.Models, ","))
		}
		if p.APIKeySet {
			b.WriteString(", key set")
		} else {
			b.WriteString(", no key")
		}
	}
	return b.String()
}
