package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// runVolume is `astrabox volume ls|rm`: the server's named volumes (what
// a sandbox's pvc volumes name), kept across sandboxes until removed.
func runVolume(ctx context.Context, args []string, stdio IO, env Env) error {
	const usage = "usage: astrabox volume ls [--backend NAME] [--json] | rm [--backend NAME] NAME [NAME ...] (named volumes)"
	if len(args) == 0 {
		return errors.New(usage)
	}
	verb, args := args[0], args[1:]
	fs := flag.NewFlagSet("volume "+verb, flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	var conn connFlags
	conn.register(fs, env)
	backend := fs.String("backend", "", "only this backend (rm: needed when several have the name)")
	asJSON := fs.Bool("json", false, "print JSON (ls)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	switch verb {
	case "ls":
		if fs.NArg() != 0 {
			return errors.New(usage)
		}
		vols, err := c.ListVolumes(ctx, *backend)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(stdio.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(vols)
		}
		tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tBACKEND\tCREATED\tIN USE BY")
		for _, v := range vols {
			created := "-"
			if v.CreatedAt != nil {
				created = v.CreatedAt.Local().Format(time.DateTime)
			}
			users := strings.Join(v.InUse, ",")
			if users == "" {
				users = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Name, v.Backend, created, users)
		}
		return tw.Flush()
	case "rm":
		if fs.NArg() == 0 {
			return errors.New(usage)
		}
		var errs []error
		for _, name := range fs.Args() {
			if err := c.DeleteVolume(ctx, *backend, name); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
			fmt.Fprintln(stdio.Stdout, name)
		}
		return errors.Join(errs...)
	}
	return errors.New(usage)
}
