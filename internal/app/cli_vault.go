package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/astrabox/astrabox/client"
)

// runVault is `astrabox vault create|ls|get|rm|set-secret|rm-secret`:
// credential vaults and their secrets. A value is read from an
// environment variable or a file (or stdin), never from the command line,
// where other users of the machine could see it; no command prints one
// (the server never returns them).
func runVault(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) == 0 {
		return errors.New("usage: astrabox vault create|ls|get|rm|set-secret|rm-secret [flags]")
	}
	return userError(runVaultVerb(ctx, args[0], args[1:], stdio, env))
}

// secretFlags are the flags of `vault set-secret`.
type secretFlags struct {
	host, pathPrefix, header, format string
	valueEnv, valueFile              string
}

func runVaultVerb(ctx context.Context, verb string, args []string, stdio IO, env Env) error {
	var conn connFlags
	fs := verbFlags("vault "+verb, stdio, env, &conn)
	asJSON := fs.Bool("json", false, "print JSON")
	var req client.VaultRequest
	var sf secretFlags
	switch verb {
	case "create":
		fs.StringVar(&req.Name, "name", "", "the vault's name (required)")
		fs.StringVar(&req.Description, "description", "", "what the vault is for")
	case "set-secret":
		fs.StringVar(&sf.host, "host", "", "where the value may go: api.example.com or *.example.com (required)")
		fs.StringVar(&sf.pathPrefix, "path-prefix", "", "only requests under this path (default: any)")
		fs.StringVar(&sf.header, "header", "", "the header that carries it (default Authorization)")
		fs.StringVar(&sf.format, "format", "", `how the value fills the header, with {value} (default "Bearer {value}" for Authorization)`)
		fs.StringVar(&sf.valueEnv, "value-env", "", "read the value from this environment variable")
		fs.StringVar(&sf.valueFile, "value-file", "", "read the value from this file (- for stdin)")
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
			return fmt.Errorf("unexpected arguments %q (usage: astrabox vault create --name NAME [--description TEXT])", rest)
		}
		if req.Name == "" {
			return errors.New("--name is required")
		}
		v, err := c.CreateVault(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, v)
		}
		_, err = fmt.Fprintln(out, v.ID)
		return err
	case "ls":
		all, err := listVaults(ctx, c)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, all)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSECRETS\tVERSION")
		for _, v := range all {
			names := make([]string, len(v.Secrets))
			for i, s := range v.Secrets {
				names[i] = s.Name
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", v.ID, v.Name, strings.Join(names, ","), v.Version)
		}
		return tw.Flush()
	case "get", "show":
		if len(rest) != 1 {
			return errors.New("usage: astrabox vault get VAULT (an id or a name)")
		}
		v, err := resolveVault(ctx, c, rest[0])
		if err != nil {
			return err
		}
		return printJSON(out, v)
	case "rm":
		if len(rest) == 0 {
			return errors.New("usage: astrabox vault rm VAULT [MORE]")
		}
		for _, ref := range rest {
			v, err := resolveVault(ctx, c, ref)
			if err != nil {
				return err
			}
			if err := c.DeleteVault(ctx, v.ID); err != nil {
				return err
			}
		}
		return nil
	case "set-secret":
		if len(rest) != 2 || sf.host == "" {
			return errors.New("usage: astrabox vault set-secret VAULT NAME --host HOST (--value-env VAR | --value-file FILE) [--path-prefix P] [--header H] [--format F]")
		}
		value, err := sf.value(stdio.Stdin, env)
		if err != nil {
			return err
		}
		v, err := resolveVault(ctx, c, rest[0])
		if err != nil {
			return err
		}
		v, err = c.PutSecret(ctx, v.ID, client.Secret{Name: rest[1], Value: value, Host: sf.host, PathPrefix: sf.pathPrefix,
			Header: sf.header, Format: sf.format})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, v)
		}
		for _, s := range v.Secrets {
			if s.Name == rest[1] {
				_, err = fmt.Fprintf(out, "%s: %s goes to %s%s in %s as %q\n", v.ID, s.Name, s.Host, s.PathPrefix, s.Header, s.Format)
			}
		}
		return err
	case "rm-secret":
		if len(rest) != 2 {
			return errors.New("usage: astrabox vault rm-secret VAULT NAME")
		}
		v, err := resolveVault(ctx, c, rest[0])
		if err != nil {
			return err
		}
		return c.DeleteSecret(ctx, v.ID, rest[1])
	}
	return fmt.Errorf("unknown vault command %q (create, ls, get, rm, set-secret, rm-secret)", verb)
}

// value reads the secret's value from --value-env or --value-file, without
// the file's final line break.
func (f *secretFlags) value(stdin io.Reader, env Env) (string, error) {
	var v string
	switch {
	case (f.valueEnv == "") == (f.valueFile == ""):
		return "", errors.New("give the value with --value-env VAR or --value-file FILE (- for stdin), one of them")
	case f.valueEnv != "":
		if v = env(f.valueEnv); v == "" {
			return "", fmt.Errorf("--value-env: $%s is empty or not set", f.valueEnv)
		}
		return v, nil
	case f.valueFile == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
		if err != nil {
			return "", fmt.Errorf("read the value from stdin: %w", err)
		}
		v = string(b)
	default:
		b, err := os.ReadFile(f.valueFile)
		if err != nil {
			return "", fmt.Errorf("read the value: %w", err)
		}
		v = string(b)
	}
	v = strings.TrimSuffix(strings.TrimSuffix(v, "\n"), "\r")
	if v == "" {
		return "", errors.New("the value is empty")
	}
	return v, nil
}

// listVaults returns every vault.
func listVaults(ctx context.Context, c *client.Client) ([]client.Vault, error) {
	return allPages(ctx, c.ListVaults)
}

// resolveVault finds a vault by id or, failing that, by its name, which
// must then be unique.
func resolveVault(ctx context.Context, c *client.Client, ref string) (client.Vault, error) {
	v, err := c.GetVault(ctx, ref)
	if err == nil || client.CodeOf(err) != "VAULT_NOT_FOUND" {
		return v, err
	}
	all, lerr := listVaults(ctx, c)
	if lerr != nil {
		return client.Vault{}, lerr
	}
	var ids []string
	for _, cand := range all {
		if cand.Name == ref {
			v = cand
			ids = append(ids, cand.ID)
		}
	}
	switch len(ids) {
	case 0:
		return client.Vault{}, err
	case 1:
		return v, nil
	}
	return client.Vault{}, fmt.Errorf("%d vaults are named %q (%s): give an id", len(ids), ref, strings.Join(ids, ", "))
}
