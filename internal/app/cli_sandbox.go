package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
)

// runSandbox is `astrabox sandbox create|ls|get|rm|renew|pause|resume|endpoint`.
// Each verb registers its flags and returns what it does once they are
// parsed and the client is made.
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
	var run func(c *client.Client, rest []string) error
	switch verb {
	case "create":
		run = sandboxCreate(ctx, fs, asJSON, stdio.Stdout)
	case "ls":
		run = sandboxList(ctx, fs, asJSON, stdio.Stdout)
	case "renew":
		expires := fs.Duration("for", time.Hour, "lifetime from now; an expiry already later is kept")
		run = func(c *client.Client, rest []string) error {
			id, err := oneID(verb, rest)
			if err != nil {
				return err
			}
			if *expires <= 0 {
				return fmt.Errorf("sandbox renew: --for %s: give a positive duration such as 2h", *expires)
			}
			return renewAtLeast(ctx, c, id, time.Now().Add(*expires), stdio.Stdout, stdio.Stderr)
		}
	case "get", "rm", "pause", "resume", "endpoint":
		run = func(c *client.Client, rest []string) error { return sandboxByID(ctx, c, verb, rest, stdio.Stdout) }
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	if run == nil {
		return fmt.Errorf("unknown sandbox command %q", verb)
	}
	return run(c, fs.Args())
}

// oneID returns the only argument of verb, a sandbox id.
func oneID(verb string, rest []string) (string, error) {
	if len(rest) != 1 {
		return "", fmt.Errorf("usage: astrabox sandbox %s ID", verb)
	}
	return rest[0], nil
}

// sandboxCreate registers create's flags and returns the verb.
func sandboxCreate(ctx context.Context, fs *flag.FlagSet, asJSON *bool, out io.Writer) func(*client.Client, []string) error {
	image := fs.String("image", "", "image (default: the profile's)")
	cpu := fs.String("cpu", "", "CPU limit, e.g. 500m")
	memory := fs.String("memory", "", "memory limit, e.g. 512Mi")
	profile := fs.String("profile", "", "runtime profile")
	backend := fs.String("backend", "", "backend")
	timeout := fs.Int64("timeout", 3600, "seconds until the sandbox expires (0: never)")
	idle := fs.Int64("idle-timeout", 0, "seconds of inactivity before deletion (0: never)")
	meta, envs := &pairFlag{}, &pairFlag{}
	fs.Var(meta, "label", "metadata key=value (repeatable)")
	fs.Var(envs, "env", "environment KEY=VALUE (repeatable)")
	return func(c *client.Client, _ []string) error {
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
	}
}

// sandboxList registers ls's flags and returns the verb.
func sandboxList(ctx context.Context, fs *flag.FlagSet, asJSON *bool, out io.Writer) func(*client.Client, []string) error {
	states, meta := &multiFlag{}, &pairFlag{}
	fs.Var(states, "state", "only this state (repeatable)")
	fs.Var(meta, "label", "only with metadata key=value (repeatable)")
	return func(c *client.Client, _ []string) error {
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
	}
}

// sandboxByID runs the verbs that act on sandboxes named by id.
func sandboxByID(ctx context.Context, c *client.Client, verb string, rest []string, out io.Writer) error {
	switch verb {
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
	id, err := oneID(verb, rest)
	if err != nil {
		return err
	}
	switch verb {
	case "pause":
		return c.Pause(ctx, id)
	case "resume":
		return c.Resume(ctx, id)
	}
	sb, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	return printJSON(out, sb)
}
