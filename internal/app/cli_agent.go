package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/astrabox/astrabox/client"
)

// agentVerbs are the verbs of `astrabox agent` that manage Agents;
// anything else (flags only) runs the built-in agent program.
var agentVerbs = map[string]bool{"create": true, "ls": true, "show": true, "rm": true}

// runAgentCommand is `astrabox agent create|ls|show|rm`, and without one
// of those verbs the built-in agent program (runAgent), whose arguments
// are all flags.
func runAgentCommand(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) == 0 {
		return errors.New("usage: astrabox agent create|ls|show|rm [flags] (astrabox agent --state FILE [flags] runs the built-in agent program)")
	}
	if agentVerbs[args[0]] {
		return userError(runAgentVerb(ctx, args[0], args[1:], stdio, env))
	}
	return runAgent(ctx, args, stdio, env)
}

func runAgentVerb(ctx context.Context, verb string, args []string, stdio IO, env Env) error {
	var conn connFlags
	fs := verbFlags("agent "+verb, stdio, env, &conn)
	asJSON := fs.Bool("json", false, "print JSON")
	var req client.AgentRequest
	var instructionsFile string
	var tools, vaults commaList
	if verb == "create" {
		fs.StringVar(&req.Name, "name", "", "the Agent's name (required)")
		fs.StringVar(&req.RuntimeProfile, "profile", "", "runtime profile its sandboxes and model come from (required)")
		fs.StringVar(&req.Model, "model", "", "model name sent to the endpoint (default: the profile's first model)")
		fs.StringVar(&req.EngineKind, "engine", "astrabox", "agent program (see GET /api/v1/engines)")
		fs.StringVar(&req.PermissionMode, "permission-mode", "", "auto runs every tool; ask asks approval first (default: the engine's first mode)")
		fs.StringVar(&req.Instructions, "instructions", "", "instructions appended to the system prompt")
		fs.StringVar(&instructionsFile, "instructions-file", "", "read the instructions from this file")
		fs.Var(&tools, "tools", "comma-separated subset of the engine's tools (default: all)")
		fs.Var(&vaults, "vaults", "comma-separated credential vaults (ids or names) whose secrets its Sessions get")
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
	case "create":
		if len(rest) > 0 {
			return fmt.Errorf("unexpected arguments %q (usage: astrabox agent create --name NAME --profile PROFILE [flags])", rest)
		}
		if req.Name == "" || req.RuntimeProfile == "" {
			return errors.New("--name and --profile are required")
		}
		if instructionsFile != "" {
			if req.Instructions != "" {
				return errors.New("give --instructions or --instructions-file, not both")
			}
			b, err := os.ReadFile(instructionsFile)
			if err != nil {
				return fmt.Errorf("read instructions: %w", err)
			}
			req.Instructions = string(b)
		}
		req.Tools = tools
		for _, ref := range vaults {
			v, err := resolveVault(ctx, c, ref)
			if err != nil {
				return err
			}
			req.VaultIDs = append(req.VaultIDs, v.ID)
		}
		a, err := c.CreateAgent(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, a)
		}
		_, err = fmt.Fprintln(out, a.ID)
		return err
	case "ls":
		all, err := allPages(ctx, c.ListAgents)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, all)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tENGINE\tPROFILE\tMODEL\tMODE\tTOOLS\tVERSION")
		for _, a := range all {
			t := "all"
			if len(a.Tools) > 0 {
				t = strings.Join(a.Tools, ",")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", a.ID, a.Name, a.EngineKind, a.RuntimeProfile, a.Model, a.PermissionMode, t, a.Version)
		}
		return tw.Flush()
	case "show":
		if len(rest) != 1 {
			return errors.New("usage: astrabox agent show AGENT (an id or a name)")
		}
		a, err := resolveAgent(ctx, c, rest[0])
		if err != nil {
			return err
		}
		return printJSON(out, a)
	case "rm":
		if len(rest) == 0 {
			return errors.New("usage: astrabox agent rm AGENT [MORE]")
		}
		for _, ref := range rest {
			a, err := resolveAgent(ctx, c, ref)
			if err != nil {
				return err
			}
			if err := c.DeleteAgent(ctx, a.ID); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown agent command %q", verb)
}
