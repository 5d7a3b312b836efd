package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/astrabox/astrabox/client"
)

// This file has the identity commands: whoami, user (administrators'
// users), key (API keys, one's own or, with --user, anyone's) and audit
// (the audit log). login and logout are in cli_login.go.

// runWhoami is `astrabox whoami`: who the key acts as and what it may do.
func runWhoami(ctx context.Context, args []string, stdio IO, env Env) error {
	var conn connFlags
	fs := verbFlags("whoami", stdio, env, &conn)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (usage: astrabox whoami [--json])", fs.Args())
	}
	server, key, err := conn.resolve()
	if err != nil {
		return err
	}
	cu, err := client.New(server, key).CurrentUser(ctx)
	if err != nil {
		return userError(err)
	}
	if *asJSON {
		return printJSON(stdio.Stdout, cu)
	}
	u := cu.User
	name := u.DisplayName
	if u.Email != "" {
		name = strings.TrimSpace(name + " <" + u.Email + ">")
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, visibleField(v)) }
	row("user", u.ID)
	if name != "" {
		row("name", name)
	}
	row("role", u.Role)
	row("kind", u.Kind)
	row("scopes", strings.Join(cu.Scopes, ", "))
	row("key", firstNonEmpty(cu.KeyID, "(none: the server's bootstrap key)"))
	row("org", u.OrgID)
	row("server", server)
	return tw.Flush()
}

// runUser is `astrabox user ls|show|add|set-role|disable|enable`: an
// administrator's users.
func runUser(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) == 0 {
		return errors.New("usage: astrabox user ls|show|add|set-role|disable|enable [flags]")
	}
	return userError(runUserVerb(ctx, args[0], args[1:], stdio, env))
}

func runUserVerb(ctx context.Context, verb string, args []string, stdio IO, env Env) error {
	var conn connFlags
	fs := verbFlags("user "+verb, stdio, env, &conn)
	asJSON := fs.Bool("json", false, "print JSON")
	var role, kind, issuer, subject, email, name string
	if verb == "add" {
		fs.StringVar(&role, "role", "", "the user's role: admin, member or viewer (required)")
		fs.StringVar(&kind, "kind", client.UserService, "service (a program's; it uses API keys) or human (a person's, known to an identity provider)")
		fs.StringVar(&issuer, "issuer", "", "a human user's identity provider (its OpenID Connect issuer URL)")
		fs.StringVar(&subject, "subject", "", "a human user's subject at --issuer")
		fs.StringVar(&email, "email", "", "the user's email address")
		fs.StringVar(&name, "name", "", "the user's display name")
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	usage := map[string]string{
		"ls": "user ls", "show": "user show ID", "add": "user add [ID] --role ROLE [--kind service|human --issuer URL --subject S] [--email E] [--name N]",
		"set-role": "user set-role ID ROLE", "disable": "user disable ID [MORE]", "enable": "user enable ID [MORE]",
	}[verb]
	if usage == "" {
		return fmt.Errorf("unknown user command %q", verb)
	}
	bad := func() error { return errors.New("usage: astrabox " + usage) }
	switch verb {
	case "ls":
		if len(rest) > 0 {
			return bad()
		}
	case "show", "set-role":
		if len(rest) != map[string]int{"show": 1, "set-role": 2}[verb] {
			return bad()
		}
	case "add":
		if len(rest) > 1 {
			return bad()
		}
		if role == "" {
			return errors.New("--role is required: admin, member or viewer")
		}
	case "disable", "enable":
		if len(rest) == 0 {
			return bad()
		}
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	out := stdio.Stdout
	switch verb {
	case "ls":
		all, err := allPages(ctx, c.ListUsers)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, all)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tROLE\tKIND\tSTATE\tEMAIL\tNAME\tCREATED\tLAST LOGIN")
		for _, u := range all {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", visibleField(u.ID), visibleField(u.Role), visibleField(u.Kind),
				map[bool]string{false: "active", true: "disabled"}[u.Disabled], dash(visibleField(u.Email)), dash(visibleField(u.DisplayName)),
				u.CreatedAt.Local().Format(time.DateTime), timeOrDash(u.LastLoginAt))
		}
		return tw.Flush()
	case "show":
		u, err := c.GetUser(ctx, rest[0])
		if err != nil {
			return err
		}
		return printJSON(out, u)
	case "add":
		req := client.UserRequest{Kind: kind, Issuer: issuer, Subject: subject, Role: &role}
		if len(rest) == 1 {
			req.ID = rest[0]
		}
		if email != "" {
			req.Email = &email
		}
		if name != "" {
			req.DisplayName = &name
		}
		u, err := c.CreateUser(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, u)
		}
		_, err = fmt.Fprintln(out, visible(u.ID))
		return err
	case "set-role":
		r := rest[1]
		u, err := c.UpdateUser(ctx, rest[0], client.UserRequest{Role: &r})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, u)
		}
		_, err = fmt.Fprintf(out, "%s is %s: keys of theirs carry at most the %s scopes now.\n", visible(u.ID), visible(u.Role), visible(u.Role))
		return err
	case "disable", "enable":
		disabled := verb == "disable"
		var done []client.User
		for _, id := range rest {
			u, err := c.UpdateUser(ctx, id, client.UserRequest{Disabled: &disabled})
			if err != nil {
				return err
			}
			done = append(done, u)
			if !*asJSON {
				what := "enabled: their keys work again"
				if disabled {
					what = "disabled: their keys no longer work"
				}
				fmt.Fprintf(out, "%s %s.\n", visible(u.ID), what)
			}
		}
		if *asJSON {
			return printJSON(out, done)
		}
	}
	return nil
}

// runKey is `astrabox key create|ls|revoke`: API keys, one's own or, with
// --user, a user's (administrators).
func runKey(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) == 0 {
		return errors.New("usage: astrabox key create|ls|revoke [flags]")
	}
	return userError(runKeyVerb(ctx, args[0], args[1:], stdio, env))
}

func runKeyVerb(ctx context.Context, verb string, args []string, stdio IO, env Env) error {
	var conn connFlags
	fs := verbFlags("key "+verb, stdio, env, &conn)
	asJSON := fs.Bool("json", false, "print JSON")
	user := fs.String("user", "", "a user's keys rather than your own (administrators)")
	var name, expires string
	var scopes commaList
	if verb == "create" {
		fs.StringVar(&name, "name", "", "what the key is for (default: \"cli\" and the time)")
		fs.Var(appendList{&scopes}, "scope", "a scope of the key: read, write or admin (repeatable, or comma-separated; default: every scope of the user's role)")
		fs.StringVar(&expires, "expires", "", "the key's lifetime: a duration such as 720h or 30d (default: none, or the server's maximum)")
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch verb {
	case "create", "ls":
		if len(rest) > 0 {
			return fmt.Errorf("unexpected arguments %q (usage: astrabox key %s [--user ID] [flags])", rest, verb)
		}
	case "revoke":
		if len(rest) == 0 {
			return errors.New("usage: astrabox key revoke ID [MORE] [--user ID]")
		}
	default:
		return fmt.Errorf("unknown key command %q", verb)
	}
	req := client.APIKeyRequest{Name: name}
	if verb == "create" {
		if expires != "" {
			d, err := parseLifetime(expires)
			if err != nil {
				return err
			}
			req.ExpiresInSeconds = int64((d + time.Second - 1) / time.Second)
		}
		if len(scopes) > 0 {
			req.Scopes = scopes
		}
		if req.Name == "" {
			req.Name = "cli " + time.Now().Format("2006-01-02 15:04")
		}
	}
	server, key, err := conn.resolve()
	if err != nil {
		return err
	}
	c := client.New(server, key)
	out := stdio.Stdout
	switch verb {
	case "create":
		var k client.NewAPIKey
		if *user != "" {
			k, err = c.CreateUserAPIKey(ctx, *user, req)
		} else {
			k, err = c.CreateAPIKey(ctx, req)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			err = printJSON(out, k)
		} else {
			_, err = fmt.Fprintln(out, visible(k.Key))
		}
		if err != nil {
			return err
		}
		life := "does not expire"
		if k.ExpiresAt != nil {
			life = "expires " + k.ExpiresAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(stdio.Stderr, "API key %s of %s (scopes %s; %s). It is shown this once and cannot be shown again: store it now.\n",
			visible(k.ID), visible(k.UserID), visible(strings.Join(k.Scopes, ", ")), life)
		return nil
	case "ls":
		var keys []client.APIKey
		if *user != "" {
			keys, err = c.ListUserAPIKeys(ctx, *user)
		} else {
			keys, err = c.ListAPIKeys(ctx)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, keys)
		}
		return printKeys(out, keys)
	case "revoke":
		usedID := keyIDOf(key)
		for _, id := range rest {
			var k client.APIKey
			if *user != "" {
				k, err = c.RevokeUserAPIKey(ctx, *user, id)
			} else {
				k, err = c.RevokeAPIKey(ctx, id)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "API key %s of %s revoked.\n", visible(k.ID), visible(k.UserID))
			if k.ID == usedID {
				fmt.Fprintln(stdio.Stderr, "note: that was the key this command used; log in with another: 'astrabox login'.")
			}
		}
	}
	return nil
}

// printKeys prints keys as a table.
func printKeys(w io.Writer, keys []client.APIKey) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tUSER\tSCOPES\tSTATE\tCREATED\tEXPIRES\tLAST USED")
	now := time.Now()
	for _, k := range keys {
		state := "active"
		switch {
		case k.RevokedAt != nil:
			state = "revoked"
		case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
			state = "expired"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", visibleField(k.ID), visibleField(k.Name), visibleField(k.UserID),
			visibleField(strings.Join(k.Scopes, ",")), state, k.CreatedAt.Local().Format(time.DateTime),
			timeOrDash(k.ExpiresAt), timeOrDash(k.LastUsedAt))
	}
	return tw.Flush()
}

// keyIDOf returns the id of a per-user key ("abx_<id>_<secret>"), or "".
func keyIDOf(key string) string {
	rest, ok := strings.CutPrefix(key, "abx_")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "_")
	return id
}

// parseLifetime reads a key's lifetime: a Go duration (720h, 90m) or a
// number of days (30d).
func parseLifetime(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		if n, err = strconv.ParseInt(days, 10, 32); err == nil {
			d = time.Duration(n) * 24 * time.Hour
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--expires %q: give a positive duration such as 720h or 30d", s)
	}
	return d, nil
}

// appendList is a flag that adds its values, repeated or comma-separated,
// to a commaList.
type appendList struct{ l *commaList }

func (a appendList) String() string {
	if a.l == nil {
		return ""
	}
	return a.l.String()
}

func (a appendList) Set(v string) error {
	var more commaList
	if err := more.Set(v); err != nil {
		return err
	}
	*a.l = append(*a.l, more...)
	return nil
}

// runAudit is `astrabox audit`: the audit log, newest first
// (administrators).
func runAudit(ctx context.Context, args []string, stdio IO, env Env) error {
	var conn connFlags
	fs := verbFlags("audit", stdio, env, &conn)
	asJSON := fs.Bool("json", false, "print JSON")
	var f client.AuditFilter
	fs.StringVar(&f.Actor, "actor", "", "only what this user did")
	fs.StringVar(&f.Action, "action", "", "only this action (user.create), or actions by a prefix ending in '.' (api_key.)")
	fs.StringVar(&f.Target, "target", "", "only what was done to this: user:ID, api_key:ID, sandbox:ID, ...")
	since := fs.String("since", "", "only entries since a time (RFC 3339: 2025-01-02T15:04:05Z) or for a duration back (24h)")
	limit := fs.Int("limit", 50, "the most entries to show")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (usage: astrabox audit [--actor ID] [--action A] [--target T] [--since TIME] [--limit N])", fs.Args())
	}
	if *limit < 1 {
		return fmt.Errorf("--limit %d: give 1 or more", *limit)
	}
	if *since != "" {
		t, err := time.Parse(time.RFC3339, *since)
		if err != nil {
			d, derr := time.ParseDuration(*since)
			if derr != nil || d <= 0 {
				return fmt.Errorf("--since %q: give an RFC 3339 time (2025-01-02T15:04:05Z) or a duration back (24h)", *since)
			}
			t = time.Now().Add(-d)
		}
		f.Since = t
	}
	c, err := conn.client()
	if err != nil {
		return userError(err)
	}
	var entries []client.AuditEntry
	more := false
	for {
		f.Limit = min(*limit-len(entries), 200)
		p, err := c.ListAudit(ctx, f)
		if err != nil {
			return userError(err)
		}
		entries = append(entries, p.Items...)
		if p.NextCursor == "" {
			break
		}
		if len(entries) >= *limit {
			more = true
			break
		}
		f.Cursor = p.NextCursor
	}
	if *asJSON {
		return printJSON(stdio.Stdout, entries)
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tACTOR\tACTION\tTARGET\tDETAIL")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.DateTime), dash(visibleField(e.ActorID)), visibleField(e.Action),
			dash(visibleField(e.Target)), dash(visibleField(string(e.Detail))))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(stdio.Stderr, "(the %d newest entries shown: raise --limit or narrow the search for more)\n", len(entries))
	}
	return nil
}

// dash is s, or "-" when s is empty.
func dash(s string) string { return firstNonEmpty(s, "-") }

// timeOrDash is t in local time, or "-" for nil.
func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}
