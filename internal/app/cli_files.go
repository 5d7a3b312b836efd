package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	execdclient "github.com/astrabox/astrabox/execd/client"
)

type execdEvent = execdclient.Event

// runCp is `astrabox cp SRC DST` where exactly one side is ID:PATH; see
// copier for what is copied where.
func runCp(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("cp", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	var conn connFlags
	conn.register(fs, env)
	maxSize := fs.String("max-size", "1GiB", "largest file to copy out of a box, per file (suffixes KiB, MiB, GiB; 0: no limit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("usage: astrabox cp [--max-size SIZE] LOCAL ID:PATH | astrabox cp ID:PATH LOCAL (- is stdin/stdout; directories are copied whole)")
	}
	// A box decides what its files hold, and a sparse file can declare
	// any size: what comes out is bounded unless the caller says 0.
	var limit int64
	if *maxSize != "0" {
		var err error
		if limit, err = parseSize(*maxSize); err != nil {
			return fmt.Errorf("cp: --max-size: %w", err)
		}
	}
	src, dst := fs.Arg(0), fs.Arg(1)
	sid, spath, sremote := splitRemote(src)
	did, dpath, dremote := splitRemote(dst)
	if sremote == dremote {
		return errors.New("cp: exactly one of SRC and DST must be ID:PATH")
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	id := sid
	if dremote {
		id = did
	}
	x, err := c.Execd(ctx, id)
	if err != nil {
		return err
	}
	cp := &copier{x: x, limit: limit, stderr: stdio.Stderr}
	if dremote {
		if src == "-" {
			return cp.stdinTo(ctx, stdio.Stdin, dpath)
		}
		err = cp.in(ctx, src, dpath)
	} else {
		if dst == "-" {
			return cp.toStdout(ctx, spath, stdio.Stdout)
		}
		err = cp.out(ctx, spath, dst)
	}
	if err == nil && cp.skipped > 0 {
		err = fmt.Errorf("cp: %d entries not copied (symbolic links or special files; named above)", cp.skipped)
	}
	return err
}

// splitRemote splits "ID:PATH"; a local path has no colon before its
// first slash.
func splitRemote(s string) (id, path string, remote bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || strings.Contains(s[:i], "/") {
		return "", s, false
	}
	return s[:i], s[i+1:], true
}

// runFiles is `astrabox files ls ID PATH`.
func runFiles(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) == 0 || args[0] != "ls" {
		return errors.New("usage: astrabox files ls ID [PATH]")
	}
	fs := flag.NewFlagSet("files ls", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	var conn connFlags
	conn.register(fs, env)
	depth := fs.Int("depth", 1, "levels to list")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return errors.New("usage: astrabox files ls ID [PATH]")
	}
	path := "/workspace"
	if fs.NArg() == 2 {
		path = fs.Arg(1)
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	x, err := c.Execd(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	entries, err := x.ListDir(ctx, path, *depth)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	for _, e := range entries {
		fmt.Fprintf(tw, "%04d\t%s\t%s\t%d\t%s\t%s\n", e.Mode, visibleField(e.Owner), visibleField(e.Group), e.Size,
			e.ModifiedAt.Local().Format("2006-01-02 15:04"), visibleField(e.Path))
	}
	return tw.Flush()
}
