package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/client"
)

// This file has what the agent platform's verbs (agent, profile, session,
// chat) share: flag parsing, error text, and finding an Agent by id or
// name.

// verbFlags returns the flag set of `astrabox NOUN VERB` with the
// connection flags registered.
func verbFlags(name string, stdio IO, env Env, conn *connFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	conn.register(fs, env)
	return fs
}

// parseArgs parses flags placed before, between or after the positional
// arguments (`chat AGENT --session ID`); arguments after "--" are all
// positional. It returns the positional arguments.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// orEmpty is *p, or "" for a nil p (a wire field that is null).
func orEmpty(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// serverError shows an error answer as the server's code and message.
type serverError struct{ ae *client.APIError }

func (e serverError) Error() string { return fmt.Sprintf("%s: %s", e.ae.Code, e.ae.Message) }
func (e serverError) Unwrap() error { return e.ae }

// userError returns err with an error answer in it shown as
// "CODE: message".
func userError(err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return serverError{ae}
	}
	return err
}

// commaList is a flag of comma-separated values.
type commaList []string

func (l *commaList) String() string { return strings.Join(*l, ",") }

func (l *commaList) Set(v string) error {
	*l = (*l)[:0]
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// resolveAgent finds an Agent by id or, failing that, by its name, which
// must then be unique.
func resolveAgent(ctx context.Context, c *client.Client, ref string) (client.Agent, error) {
	a, err := c.GetAgent(ctx, ref)
	if err == nil || client.CodeOf(err) != "AGENT_NOT_FOUND" {
		return a, err
	}
	notFound := err
	var matches []client.Agent
	page := client.PageOptions{Limit: 200}
	for {
		p, err := c.ListAgents(ctx, page)
		if err != nil {
			return client.Agent{}, err
		}
		for _, a := range p.Items {
			if a.Name == ref {
				matches = append(matches, a)
			}
		}
		if p.NextCursor == "" {
			break
		}
		page.Cursor = p.NextCursor
	}
	switch len(matches) {
	case 0:
		return client.Agent{}, notFound
	case 1:
		return matches[0], nil
	}
	ids := make([]string, len(matches))
	for i, m := range matches {
		ids[i] = m.ID
	}
	return client.Agent{}, fmt.Errorf("%d agents are named %q (%s): give an id", len(matches), ref, strings.Join(ids, ", "))
}

// newClientMessageID returns a random client_message_id.
func newClientMessageID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "cli_" + hex.EncodeToString(b[:])
}

// isTerminal reports whether f is a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(file.Fd()), unix.TCGETS)
	return err == nil
}

// readText returns args joined by spaces, or stdin when args are empty or
// "-".
func readText(args []string, stdin io.Reader) (string, error) {
	if len(args) > 0 && !(len(args) == 1 && args[0] == "-") {
		return strings.Join(args, " "), nil
	}
	b, err := io.ReadAll(io.LimitReader(stdin, 1<<20+1))
	if err != nil {
		return "", fmt.Errorf("read stdin: %w", err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}
