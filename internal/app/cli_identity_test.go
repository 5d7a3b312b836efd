package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/server/servertest"
)

// vars is an environment of the variables given and no other.
func vars(kv ...string) Env {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// runEnv runs astrabox args in-process with stdin in environment env.
func runEnv(t *testing.T, env Env, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut := newOutBuffer(), newOutBuffer()
	code := Main(ctx, args, IO{Stdin: strings.NewReader(stdin), Stdout: out, Stderr: errOut}, env)
	return cliResult{out.String(), errOut.String(), code}
}

// cliStep is a command and what it should print and exit with.
type cliStep struct {
	name   string
	env    Env // nil: the step's table's
	stdin  string
	args   []string
	code   int
	stdout []string
	stderr []string
	// rows are table rows stdout must have: each the cells of a line, in
	// order and next to each other, whatever the columns' widths.
	rows [][]string
}

// check runs a step and checks what it printed; it returns the result.
func (st cliStep) check(t *testing.T, env Env) cliResult {
	t.Helper()
	if st.env != nil {
		env = st.env
	}
	r := runEnv(t, env, st.stdin, st.args...)
	if r.code != st.code {
		t.Fatalf("astrabox %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(st.args, " "), r.code, st.code, r.stdout, r.stderr)
	}
	for _, w := range st.stdout {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("astrabox %s: stdout lacks %q:\n%s", strings.Join(st.args, " "), w, r.stdout)
		}
	}
	for _, w := range st.stderr {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("astrabox %s: stderr lacks %q:\n%s", strings.Join(st.args, " "), w, r.stderr)
		}
	}
	for _, row := range st.rows {
		if !slices.ContainsFunc(strings.Split(r.stdout, "\n"), func(line string) bool { return hasRun(strings.Fields(line), row) }) {
			t.Errorf("astrabox %s: no row has %q:\n%s", strings.Join(st.args, " "), row, r.stdout)
		}
	}
	return r
}

// hasRun reports whether want is a run of cells.
func hasRun(cells, want []string) bool {
	for i := 0; i+len(want) <= len(cells); i++ {
		if slices.Equal(cells[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

func runSteps(t *testing.T, env Env, steps []cliStep) {
	t.Helper()
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) { st.check(t, env) })
	}
}

// TestCLIIdentity runs whoami, user, key and audit as the bootstrap key's
// administrator, and as a member, with the input they refuse.
func TestCLIIdentity(t *testing.T) {
	env := servertest.New(t, servertest.Options{})
	admin := vars("ASTRABOX_URL", env.URL, "ASTRABOX_API_KEY", servertest.Key, "HOME", t.TempDir())
	runSteps(t, admin, []cliStep{
		{name: "whoami", args: []string{"whoami"}, stdout: []string{"user    admin", "role    admin", "kind    service",
			"scopes  read, write, admin", "key     (none: the server's bootstrap key)", "server  " + env.URL}},
		{name: "whoami --json", args: []string{"whoami", "--json"}, stdout: []string{`"user_id": "admin"`, `"scopes": [`}},
		{name: "whoami, an argument", args: []string{"whoami", "me"}, code: 1, stderr: []string{"usage: astrabox whoami"}},
		{name: "user add", args: []string{"user", "add", "alice", "--role", "member", "--email", "alice@example.com", "--name", "Alice"},
			stdout: []string{"alice\n"}},
		{name: "user add, generated id", args: []string{"user", "add", "--role", "viewer"}, stdout: []string{"usr_"}},
		{name: "user add, human", args: []string{"user", "add", "bob", "--role", "viewer", "--kind", "human", "--issuer", "https://idp.example.com",
			"--subject", "b-123", "--json"}, stdout: []string{`"kind": "human"`, `"subject": "b-123"`}},
		{name: "user add, unknown role", args: []string{"user", "add", "carol", "--role", "owner"}, code: 1,
			stderr: []string{`astrabox user: INVALID_REQUEST: role "owner" is not one of admin, member, viewer`}},
		{name: "user add, no role", args: []string{"user", "add", "carol"}, code: 1, stderr: []string{"--role is required: admin, member or viewer"}},
		{name: "user add, a human without a subject", args: []string{"user", "add", "carol", "--role", "member", "--kind", "human"}, code: 1,
			stderr: []string{"INVALID_REQUEST: a human user needs the issuer and subject"}},
		{name: "user add, unknown kind", args: []string{"user", "add", "carol", "--role", "member", "--kind", "robot"}, code: 1,
			stderr: []string{"INVALID_REQUEST: kind must be service or human"}},
		{name: "user add, again", args: []string{"user", "add", "alice", "--role", "member"}, code: 1, stderr: []string{"ALREADY_EXISTS"}},
		{name: "user add, a bad id", args: []string{"user", "add", "Alice Smith", "--role", "member"}, code: 1, stderr: []string{"INVALID_REQUEST: user_id must be"}},
		{name: "user ls", args: []string{"user", "ls"}, stdout: []string{"ID", "ROLE", "STATE", "LAST LOGIN"},
			rows: [][]string{{"admin", "admin", "service", "active"}, {"alice", "member", "service", "active", "alice@example.com", "Alice"}, {"bob", "viewer", "human", "active", "-", "-"}}},
		{name: "user ls --json", args: []string{"user", "ls", "--json"}, stdout: []string{`"user_id": "alice"`, `"email": "alice@example.com"`}},
		{name: "user show", args: []string{"user", "show", "alice"}, stdout: []string{`"user_id": "alice"`, `"display_name": "Alice"`, `"disabled": false`}},
		{name: "user show, missing", args: []string{"user", "show", "nobody"}, code: 1, stderr: []string{`NOT_FOUND: user "nobody" not found`}},
		{name: "user set-role", args: []string{"user", "set-role", "alice", "viewer"}, stdout: []string{"alice is viewer"}},
		{name: "user set-role, unknown role", args: []string{"user", "set-role", "alice", "root"}, code: 1,
			stderr: []string{`INVALID_REQUEST: role "root" is not one of admin, member, viewer`}},
		{name: "user set-role, no role", args: []string{"user", "set-role", "alice"}, code: 1, stderr: []string{"usage: astrabox user set-role ID ROLE"}},
		{name: "user set-role, oneself", args: []string{"user", "set-role", "admin", "member"}, code: 1, stderr: []string{"FORBIDDEN: an administrator cannot change their own role"}},
		{name: "user set-role back", args: []string{"user", "set-role", "alice", "member", "--json"}, stdout: []string{`"role": "member"`}},
		{name: "user disable", args: []string{"user", "disable", "alice"}, stdout: []string{"alice disabled: their keys no longer work."}},
		{name: "user ls, disabled", args: []string{"user", "ls"}, rows: [][]string{{"alice", "member", "service", "disabled"}}},
		{name: "user disable, oneself", args: []string{"user", "disable", "admin"}, code: 1, stderr: []string{"FORBIDDEN: "}},
		{name: "user enable", args: []string{"user", "enable", "alice"}, stdout: []string{"alice enabled: their keys work again."}},
		{name: "user enable, none", args: []string{"user", "enable"}, code: 1, stderr: []string{"usage: astrabox user enable ID [MORE]"}},
		{name: "user, unknown verb", args: []string{"user", "remove", "alice"}, code: 2, stderr: []string{`unknown command "remove"`, "set-role"}},
		{name: "user, no verb", args: []string{"user"}, code: 1, stderr: []string{"usage: astrabox user ls|show|add|set-role|disable|enable"}},
		{name: "key create, unknown scope", args: []string{"key", "create", "--user", "alice", "--scope", "read", "--scope", "writ"}, code: 1,
			stderr: []string{`astrabox key: INVALID_REQUEST: scope "writ" is not one of read, write, admin`}},
		{name: "key create, above the role", args: []string{"key", "create", "--user", "alice", "--scope", "admin"}, code: 1,
			stderr: []string{`FORBIDDEN: scope "admin" exceeds the member role of user "alice"`}},
		{name: "key create, a bad lifetime", args: []string{"key", "create", "--expires", "soon"}, code: 1, stderr: []string{`--expires "soon": give a positive duration`}},
		{name: "key create, a negative lifetime", args: []string{"key", "create", "--expires", "-1h"}, code: 1, stderr: []string{"give a positive duration"}},
		{name: "key create, a missing user", args: []string{"key", "create", "--user", "nobody"}, code: 1, stderr: []string{"NOT_FOUND"}},
		{name: "key create, an argument", args: []string{"key", "create", "alice"}, code: 1, stderr: []string{"unexpected arguments"}},
		{name: "key ls, a missing user", args: []string{"key", "ls", "--user", "nobody"}, code: 1, stderr: []string{"NOT_FOUND"}},
		{name: "key revoke, missing", args: []string{"key", "revoke", "--user", "alice", "nokey"}, code: 1, stderr: []string{`NOT_FOUND: API key "nokey" not found`}},
		{name: "key revoke, none", args: []string{"key", "revoke"}, code: 1, stderr: []string{"usage: astrabox key revoke ID"}},
		{name: "key, unknown verb", args: []string{"key", "delete"}, code: 2, stderr: []string{`unknown command "delete"`}},
	})

	// A key of alice's, made by the administrator, shown once.
	r := cliStep{args: []string{"key", "create", "--user", "alice", "--name", "ci", "--scope", "read,write", "--expires", "30d"},
		stderr: []string{"of alice (scopes read, write; expires ", "shown this once and cannot be shown again"}}.check(t, admin)
	aliceKey := strings.TrimSpace(r.stdout)
	aliceKeyID := keyIDOf(aliceKey)
	if !strings.HasPrefix(aliceKey, "abx_") || len(aliceKeyID) != 12 || strings.Contains(r.stderr, aliceKey) {
		t.Fatalf("key create printed %q, %q", r.stdout, r.stderr)
	}
	alice := vars("ASTRABOX_URL", env.URL, "ASTRABOX_API_KEY", aliceKey, "HOME", t.TempDir())
	var ownID string
	runSteps(t, alice, []cliStep{
		{name: "whoami, alice", args: []string{"whoami"}, stdout: []string{"user    alice", "name    Alice <alice@example.com>", "role    member",
			"scopes  read, write", "key     " + aliceKeyID}},
		{name: "key create, her own, in JSON", args: []string{"key", "create", "--name", "laptop", "--json"},
			stdout: []string{`"key": "abx_`, `"name": "laptop"`, `"scopes": [`}, stderr: []string{"shown this once"}},
		{name: "key ls, her own", args: []string{"key", "ls"}, stdout: []string{"NAME", "LAST USED"},
			rows: [][]string{{aliceKeyID, "ci", "alice", "read,write", "active"}, {"laptop", "alice", "read,write", "active"}}},
		{name: "key ls --json", args: []string{"key", "ls", "--json"}, stdout: []string{`"key_id": "` + aliceKeyID + `"`}},
		{name: "user ls, a member", args: []string{"user", "ls"}, code: 1, stderr: []string{"FORBIDDEN"}},
		{name: "key ls --user, a member", args: []string{"key", "ls", "--user", "admin"}, code: 1, stderr: []string{"FORBIDDEN"}},
		{name: "audit, a member", args: []string{"audit"}, code: 1, stderr: []string{"FORBIDDEN"}},
		{name: "key create, an admin key", args: []string{"key", "create", "--scope", "admin"}, code: 1, stderr: []string{"FORBIDDEN"}},
	})
	r = runEnv(t, alice, "", "key", "ls", "--json")
	var keys []struct {
		ID   string `json:"key_id"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &keys); err != nil {
		t.Fatal(err, r.stdout)
	}
	for _, k := range keys {
		if k.Name == "laptop" {
			ownID = k.ID
		}
	}
	runSteps(t, alice, []cliStep{
		{name: "key revoke, her own", args: []string{"key", "revoke", ownID}, stdout: []string{"API key " + ownID + " of alice revoked."}},
		{name: "key ls, revoked", args: []string{"key", "ls"}, rows: [][]string{{ownID, "laptop", "alice", "read,write", "revoked"}}},
		{name: "key revoke, the one in use", args: []string{"key", "revoke", aliceKeyID}, stdout: []string{"revoked"},
			stderr: []string{"that was the key this command used"}},
		{name: "whoami, revoked", args: []string{"whoami"}, code: 1,
			stderr: []string{"UNAUTHORIZED: missing or invalid API key (log in with 'astrabox login', or give --api-key or set ASTRABOX_API_KEY)"}},
	})

	runSteps(t, admin, []cliStep{
		{name: "key ls --user", args: []string{"key", "ls", "--user", "alice"}, rows: [][]string{{aliceKeyID, "ci", "alice", "read,write", "revoked"},
			{"laptop", "alice", "read,write", "revoked"}}},
		{name: "key create, own, expired soon", args: []string{"key", "create", "--expires", "1s", "--name", "brief"}, stdout: []string{"abx_"}},
		{name: "audit", args: []string{"audit"}, stdout: []string{"TIME", "ACTOR", "ACTION", "TARGET", "DETAIL"},
			rows: [][]string{{"admin", "user.create", "user:alice", `{"kind":"service","role":"member"}`}, {"alice", "api_key.revoke", "api_key:" + aliceKeyID},
				{"admin", "user.disable", "user:alice", "-"}}},
		{name: "audit by target and action", args: []string{"audit", "--target", "user:alice", "--action", "user."},
			stdout: []string{"user.enable", "user.disable", "user.set_role", "user.create"}},
		{name: "audit by actor", args: []string{"audit", "--actor", "alice", "--json"}, stdout: []string{`"actor_id": "alice"`, `"action": "api_key.create"`}},
		{name: "audit, a limit", args: []string{"audit", "--limit", "2", "--action", "user."}, stdout: []string{"user.enable"},
			stderr: []string{"the 2 newest entries shown"}},
		{name: "audit since a time", args: []string{"audit", "--since", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "--target", "user:alice"},
			stdout: []string{"user.create"}},
		{name: "audit since a duration", args: []string{"audit", "--since", "1h", "--actor", "alice"}, stdout: []string{"api_key.revoke"}},
		{name: "audit, a bad time", args: []string{"audit", "--since", "yesterday"}, code: 1, stderr: []string{`--since "yesterday": give an RFC 3339 time`}},
		{name: "audit, a bad limit", args: []string{"audit", "--limit", "0"}, code: 1, stderr: []string{"--limit 0: give 1 or more"}},
		{name: "audit, an argument", args: []string{"audit", "user:alice"}, code: 1, stderr: []string{"unexpected arguments"}},
	})
	// The --limit beyond a page: pages are read until it is reached.
	r = runEnv(t, admin, "", "audit", "--limit", "500", "--json")
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || r.code != 0 || len(entries) != 12 {
		t.Fatalf("audit --limit 500: %d entries, %v, %s", len(entries), err, r.stderr)
	}
	if strings.Count(runEnv(t, admin, "", "audit", "--limit", "3").stdout, "\n") != 4 {
		t.Fatal("audit --limit 3 printed other than a header and 3 entries")
	}
}

// TestCLILogin: login checks a key with the server and stores it, mode
// 0600, for whoami and the rest to use; the environment and flags win
// over it; logout removes it.
func TestCLILogin(t *testing.T) {
	env := servertest.New(t, servertest.Options{})
	admin := vars("ASTRABOX_URL", env.URL, "ASTRABOX_API_KEY", servertest.Key, "HOME", t.TempDir())
	cliStep{args: []string{"user", "add", "alice", "--role", "member"}}.check(t, admin)
	aliceKey := strings.TrimSpace(cliStep{args: []string{"key", "create", "--user", "alice", "--name", "laptop"}}.check(t, admin).stdout)
	aliceKeyID := keyIDOf(aliceKey)

	home, dataDir := t.TempDir(), t.TempDir()
	user := vars("HOME", home) // no server, no key: only the stored ones
	path := filepath.Join(home, ".config", "astrabox", "credentials.json")
	runSteps(t, user, []cliStep{
		{name: "whoami before login", args: []string{"whoami", "--data-dir", dataDir}, code: 1,
			stderr: []string{"no API key for http://127.0.0.1:8080: run 'astrabox login --server http://127.0.0.1:8080'"}},
		{name: "login, a key refused", stdin: "abx_aaaaaaaaaaaa_" + strings.Repeat("b", 52) + "\n", args: []string{"login", "--server", env.URL}, code: 1,
			stderr: []string{env.URL + " did not accept the key; nothing was stored: UNAUTHORIZED: missing or invalid API key\n"}},
		{name: "login, no key", stdin: "\n", args: []string{"login", "--server", env.URL}, code: 1, stderr: []string{"no key on stdin: paste one, or give --key"}},
		{name: "login, not a URL", args: []string{"login", "--server", "astrabox.example.com", "--key", aliceKey}, code: 1,
			stderr: []string{`server "astrabox.example.com": give a URL such as https://astrabox.example.com`}},
		{name: "login, an argument", args: []string{"login", aliceKey}, code: 1, stderr: []string{"unexpected arguments"}},
		{name: "login, no home", env: vars(), stdin: aliceKey, args: []string{"login", "--server", env.URL}, code: 1, stderr: []string{"set HOME or XDG_CONFIG_HOME"}},
	})
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused login stored something: %v", err)
	}

	// A key pasted on stdin, with the spaces a paste brings.
	cliStep{name: "login", stdin: "  " + aliceKey + "\n", args: []string{"login", "--server", env.URL + "/"},
		stdout: []string{"Logged in to " + env.URL + " as alice (member; scopes read, write; key " + aliceKeyID + ").", "stored in " + path}}.check(t, user)
	checkCredentialsFile(t, path, env.URL, aliceKey)
	runSteps(t, user, []cliStep{
		{name: "whoami, the stored key", args: []string{"whoami"}, stdout: []string{"user    alice", "role    member", "key     " + aliceKeyID, "server  " + env.URL}},
		{name: "key ls, the stored key", args: []string{"key", "ls"}, stdout: []string{aliceKeyID + "  laptop"}},
		{name: "the environment's key wins", env: vars("HOME", home, "ASTRABOX_URL", env.URL, "ASTRABOX_API_KEY", servertest.Key), args: []string{"whoami"},
			stdout: []string{"user    admin"}},
		{name: "the flag's key wins", env: vars("HOME", home, "ASTRABOX_API_KEY", aliceKey), args: []string{"whoami", "--server", env.URL, "--api-key", servertest.Key},
			stdout: []string{"user    admin"}},
		{name: "the environment's server wins", env: vars("HOME", home, "ASTRABOX_URL", "http://127.0.0.1:1"), args: []string{"whoami", "--data-dir", dataDir},
			code: 1, stderr: []string{"no API key for http://127.0.0.1:1"}},
		{name: "the flag's server wins", args: []string{"whoami", "--server", "http://127.0.0.1:1", "--data-dir", dataDir}, code: 1,
			stderr: []string{"no API key for http://127.0.0.1:1"}},
		{name: "login with the environment's key set", env: vars("HOME", home, "ASTRABOX_API_KEY", servertest.Key), args: []string{"login", "--key", aliceKey},
			stdout: []string{"as alice"}, stderr: []string{"$ASTRABOX_API_KEY is set: until it is unset, commands use it"}},
		{name: "login, a key refused, the stored one kept", args: []string{"login", "--key", "nope"}, code: 1, stderr: []string{"nothing was stored"}},
	})
	checkCredentialsFile(t, path, env.URL, aliceKey)
	// A key given without a server goes to the local one, never to the
	// server of the last login.
	for _, conn := range []connFlags{{key: servertest.Key, env: user, dataDir: dataDir}, {env: vars("HOME", home, "ASTRABOX_API_KEY", "k"), dataDir: dataDir}} {
		if conn.key == "" {
			conn.register(flag.NewFlagSet("x", flag.ContinueOnError), conn.env)
		}
		if srv, key, err := conn.resolve(); err != nil || srv != defaultServer || key == aliceKey {
			t.Fatalf("a key without a server went to %q (%v)", srv, err)
		}
	}

	// A second server's key; the first's stays, the second is now the
	// default; a looser mode is tightened.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	other := servertest.New(t, servertest.Options{})
	cliStep{name: "login, another server", args: []string{"login", "--server", other.URL, "--key", servertest.Key},
		stdout: []string{"as admin (admin; scopes read, write, admin; the server's bootstrap key)"}}.check(t, user)
	checkCredentialsFile(t, path, other.URL, servertest.Key)
	runSteps(t, user, []cliStep{
		{name: "whoami, the last server", args: []string{"whoami"}, stdout: []string{"user    admin", "server  " + other.URL}},
		{name: "whoami, the first server", args: []string{"whoami", "--server", env.URL}, stdout: []string{"user    alice"}},
		{name: "logout", args: []string{"logout"}, stdout: []string{"Logged out of " + other.URL + ": its key is forgotten here, not revoked."}},
		{name: "logout, again", args: []string{"logout"}, stdout: []string{"Not logged in to any server."}},
		{name: "whoami after logout", args: []string{"whoami", "--data-dir", dataDir}, code: 1, stderr: []string{"no API key for http://127.0.0.1:8080"}},
		{name: "whoami, the first server still", args: []string{"whoami", "--server", env.URL}, stdout: []string{"user    alice"}},
		{name: "logout, the first server", args: []string{"logout", "--server", env.URL},
			stdout: []string{"Logged out of " + env.URL, "'astrabox key revoke " + aliceKeyID + "' revokes it"}},
	})
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the credentials file outlived its last key: %v", err)
	}

	// $XDG_CONFIG_HOME, when set, holds the file; --all empties it.
	xdg := t.TempDir()
	inXDG := vars("HOME", home, "XDG_CONFIG_HOME", xdg)
	cliStep{args: []string{"login", "--server", env.URL, "--key", aliceKey}}.check(t, inXDG)
	checkCredentialsFile(t, filepath.Join(xdg, "astrabox", "credentials.json"), env.URL, aliceKey)
	runSteps(t, inXDG, []cliStep{
		{name: "whoami, XDG", args: []string{"whoami"}, stdout: []string{"user    alice"}},
		{name: "logout --all", args: []string{"logout", "--all"}, stdout: []string{"Logged out of every server (1 stored key forgotten)."}},
	})

	// A damaged file is reported, not ignored.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	cliStep{args: []string{"whoami"}, code: 1, stderr: []string{"credentials file " + path + " is damaged"}}.check(t, user)
}

// checkCredentialsFile fails unless the file at path is its owner's only
// (in a directory that is too) and holds key for server, the current one.
func checkCredentialsFile(t *testing.T, path, server, key string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v, want 0600", fi.Mode().Perm())
	}
	if di, err := os.Stat(filepath.Dir(path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("credentials directory: %v, %v", di.Mode(), err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c credentials
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Current != server || c.Servers[server].APIKey != key {
		t.Fatalf("credentials file %s, want %s's key current", b, server)
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".credentials-*")); len(matches) > 0 {
		t.Fatalf("temporary files left: %v", matches)
	}
}

// TestCLILoginTerminal: a key typed on a terminal is not shown, and the
// terminal shows what is typed again afterwards.
func TestCLILoginTerminal(t *testing.T) {
	env := servertest.New(t, servertest.Options{})
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	home := t.TempDir()
	out, errOut := newOutBuffer(), newOutBuffer()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"login", "--server", env.URL}, IO{Stdin: tty, Stdout: out, Stderr: errOut}, vars("HOME", home))
	}()
	errOut.waitFor(t, "API key for "+env.URL+" (not shown): ", 1)
	if _, err := io.WriteString(ptmx, servertest.Key+"\n"); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 {
		t.Fatalf("login on a terminal: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS); err != nil || tio.Lflag&unix.ECHO == 0 {
		t.Fatalf("the terminal's echo was not restored: %v", err)
	}
	tty.Close()
	echoed, err := io.ReadAll(ptmx)
	if err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatal(err)
	}
	if strings.Contains(string(echoed), servertest.Key) {
		t.Fatalf("the terminal showed the key: %q", echoed)
	}
	if !strings.Contains(out.String(), "as admin") {
		t.Fatalf("login printed %q", out.String())
	}
}

// TestCLIIdentityParsing covers what the identity commands read from
// their arguments: server URLs, key lifetimes and key ids.
func TestCLIIdentityParsing(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080": "http://127.0.0.1:8080", "HTTPS://AstraBox.Example.com/": "https://astrabox.example.com",
		"https://example.com/abx//": "https://example.com/abx",
	} {
		if got, err := loginServer(in); err != nil || got != want {
			t.Errorf("loginServer(%q) = %q, %v; want %q", in, got, err, want)
		}
		if got := serverKey(in); got != want {
			t.Errorf("serverKey(%q) = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"example.com", "ftp://example.com", "https://", "https://u:p@example.com", "https://example.com/?x=1"} {
		if got, err := loginServer(in); err == nil {
			t.Errorf("loginServer(%q) = %q, want an error", in, got)
		}
	}
	for in, want := range map[string]time.Duration{"720h": 720 * time.Hour, "30d": 30 * 24 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := parseLifetime(in); err != nil || got != want {
			t.Errorf("parseLifetime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "0d", "-1h", "d", "1.5d", "soon"} {
		if got, err := parseLifetime(in); err == nil {
			t.Errorf("parseLifetime(%q) = %v, want an error", in, got)
		}
	}
	if got := keyIDOf("abx_abcdefgh2345_" + strings.Repeat("x", 52)); got != "abcdefgh2345" {
		t.Errorf("keyIDOf = %q", got)
	}
	if got := keyIDOf(servertest.Key); got != "" {
		t.Errorf("keyIDOf(the bootstrap key) = %q", got)
	}
	for host, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "example.com": false, "10.0.0.1": false} {
		if isLoopback(host) != want {
			t.Errorf("isLoopback(%q) = %v", host, !want)
		}
	}
}
