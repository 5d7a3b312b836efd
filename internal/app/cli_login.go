package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/client"
)

// This file has `astrabox login` and `astrabox logout` and the file they
// keep: an API key per server, in the user's config directory
// ($XDG_CONFIG_HOME/astrabox/credentials.json, else
// ~/.config/astrabox/credentials.json), readable by its owner only. The
// connection flags (connFlags.resolve) read it after --server and
// --api-key and their environment variables, which win over it.

// credentials is the content of the credentials file.
type credentials struct {
	// Current is the server of the last login: commands given no
	// --server and no $ASTRABOX_URL use it.
	Current string `json:"current,omitempty"`
	// Servers are the stored credentials by server URL (serverKey).
	Servers map[string]credential `json:"servers"`
}

// credential is what login stored for one server. An API key is the one
// way to sign in from the CLI today; signing in in a browser through the
// server's OpenID Connect provider, when the server offers it, will store
// what it obtains here beside it.
type credential struct {
	APIKey string `json:"api_key,omitempty"`
	// UserID and KeyID are who the key was when stored (for the user's
	// eyes: whoami asks the server).
	UserID  string    `json:"user_id,omitempty"`
	KeyID   string    `json:"key_id,omitempty"`
	SavedAt time.Time `json:"saved_at"`
}

// credentialsPath returns the credentials file's path: under
// $XDG_CONFIG_HOME, else under $HOME/.config; "" when neither is set.
func credentialsPath(env Env) string {
	dir := env("XDG_CONFIG_HOME")
	if dir == "" {
		home := env("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "astrabox", "credentials.json")
}

// loadCredentials reads the credentials file: empty when it does not
// exist, or when there is no config directory (path "").
func loadCredentials(env Env) (creds credentials, path string, err error) {
	creds.Servers = map[string]credential{}
	path = credentialsPath(env)
	if path == "" {
		return creds, "", nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return creds, path, nil
	}
	if err != nil {
		return creds, path, fmt.Errorf("credentials: %w", err)
	}
	if err := json.Unmarshal(b, &creds); err != nil {
		return creds, path, fmt.Errorf("credentials file %s is damaged (log in again after removing it): %w", path, err)
	}
	if creds.Servers == nil {
		creds.Servers = map[string]credential{}
	}
	return creds, path, nil
}

// save writes creds to path, mode 0600 in a directory of mode 0700,
// replacing the file at once (never half written); with no server left
// it removes the file.
func (creds credentials) save(path string) error {
	if len(creds.Servers) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("credentials: %w", err)
		}
		return nil
	}
	b, err := json.MarshalIndent(creds, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	f, err := os.CreateTemp(dir, ".credentials-*.json") // mode 0600
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	defer os.Remove(f.Name()) // after a failure; gone once renamed
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}

// serverKey is the form of a server URL that credentials are stored
// under: scheme and host in lower case, no trailing slash.
func serverKey(server string) string {
	u, err := url.Parse(strings.TrimSpace(server))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return strings.TrimRight(server, "/")
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}

// loginServer checks a server URL given to login and returns its
// serverKey.
func loginServer(server string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(server))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("server %q: give a URL such as https://astrabox.example.com", server)
	}
	return serverKey(server), nil
}

// runLogin is `astrabox login [--server URL] [--key KEY]`: it checks the
// key with the server (GET /api/v1/user/current) and stores it for that
// server in the credentials file; the server becomes the one commands use
// when given none.
func runLogin(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: astrabox login [--server URL] [--key KEY]\n\n"+
			"Stores an API key for a server, checked with the server first, in your credentials file; commands use it\n"+
			"when given no --api-key and no $ASTRABOX_API_KEY. With no --key the key is read from stdin (paste it;\n"+
			"a terminal does not show it).\n\nflags:\n")
		fs.PrintDefaults()
	}
	server := fs.String("server", env("ASTRABOX_URL"), "the server ($ASTRABOX_URL; default: the server of the last login, else "+defaultServer+")")
	key := fs.String("key", "", "the API key (default: read from stdin; on the command line, other users of this machine may see it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (usage: astrabox login [--server URL] [--key KEY])", fs.Args())
	}
	creds, path, err := loadCredentials(env)
	if err != nil {
		return err
	}
	if path == "" {
		return errors.New("no config directory to store the key in: set HOME or XDG_CONFIG_HOME")
	}
	srv, err := loginServer(firstNonEmpty(*server, creds.Current, defaultServer))
	if err != nil {
		return err
	}
	// An API key is the one credential the CLI signs in with; a browser
	// sign-in through the server's OpenID Connect provider will be the
	// other branch here, once servers offer it.
	k := strings.TrimSpace(*key)
	if k == "" {
		if k, err = readKey(ctx, stdio, srv); err != nil {
			return err
		}
	}
	cu, err := client.New(srv, k).CurrentUser(ctx)
	if err != nil {
		return fmt.Errorf("%s did not accept the key; nothing was stored: %w", srv, keyRefused{userError(err)})
	}
	creds.Servers[srv] = credential{APIKey: k, UserID: cu.User.ID, KeyID: cu.KeyID, SavedAt: time.Now().UTC().Truncate(time.Second)}
	creds.Current = srv
	if err := creds.save(path); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "Logged in to %s as %s (%s; scopes %s; %s).\nThe key is stored in %s.\n", visible(srv), visible(cu.User.ID),
		visible(cu.User.Role), visible(strings.Join(cu.Scopes, ", ")), keyName(cu.KeyID), path)
	if u, err := url.Parse(srv); err == nil && u.Scheme == "http" && !isLoopback(u.Hostname()) {
		fmt.Fprintf(stdio.Stderr, "note: %s is plain HTTP: the key crosses the network unencrypted with every request; prefer https://.\n", visible(srv))
	}
	if env("ASTRABOX_API_KEY") != "" {
		fmt.Fprintln(stdio.Stderr, "note: $ASTRABOX_API_KEY is set: until it is unset, commands use it, with $ASTRABOX_URL or else "+defaultServer+
			", rather than the stored key.")
	}
	if u := env("ASTRABOX_URL"); u != "" && serverKey(u) != srv {
		fmt.Fprintf(stdio.Stderr, "note: $ASTRABOX_URL points commands at %s rather than %s.\n", visible(u), visible(srv))
	}
	return nil
}

// errKeyRefused marks the error of a key login was given and the server
// refused: Main adds no advice to log in to it.
var errKeyRefused = errors.New("key refused")

type keyRefused struct{ error }

func (e keyRefused) Unwrap() []error { return []error{e.error, errKeyRefused} }

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keyName describes the key of a request: its id, or the bootstrap key.
func keyName(keyID string) string {
	if keyID == "" {
		return "the server's bootstrap key"
	}
	return "key " + keyID
}

// readKey reads a key from stdin: a line, not shown when stdin is a
// terminal.
func readKey(ctx context.Context, stdio IO, server string) (string, error) {
	if f, ok := stdio.Stdin.(*os.File); ok && isTerminal(f) {
		if restore, err := noEcho(int(f.Fd())); err == nil {
			defer restore()
		}
		fmt.Fprintf(stdio.Stderr, "API key for %s (not shown): ", visible(server))
		defer fmt.Fprintln(stdio.Stderr)
	}
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(io.LimitReader(stdio.Stdin, 64<<10)).ReadString('\n')
		got <- line{s, err}
	}()
	var l line
	select {
	case l = <-got:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if l.err != nil && !errors.Is(l.err, io.EOF) {
		return "", fmt.Errorf("read the key from stdin: %w", l.err)
	}
	k := strings.TrimSpace(l.s)
	if k == "" {
		return "", errors.New("no key on stdin: paste one, or give --key")
	}
	return k, nil
}

// noEcho stops the terminal fd from showing what is typed and returns
// how to restore it.
func noEcho(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

// runLogout is `astrabox logout [--server URL | --all]`: it removes the
// stored key of a server (the key stays valid on the server: `astrabox
// key revoke` revokes it).
func runLogout(_ context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("logout", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: astrabox logout [--server URL | --all]\n\n"+
			"Removes the key 'astrabox login' stored for a server from your credentials file. The key itself stays\n"+
			"valid: 'astrabox key revoke ID' revokes it.\n\nflags:\n")
		fs.PrintDefaults()
	}
	server := fs.String("server", env("ASTRABOX_URL"), "the server ($ASTRABOX_URL; default: the server of the last login)")
	all := fs.Bool("all", false, "remove the keys of every server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (usage: astrabox logout [--server URL | --all])", fs.Args())
	}
	creds, path, err := loadCredentials(env)
	if err != nil {
		return err
	}
	if path == "" {
		return errors.New("no config directory, so no stored key: set HOME or XDG_CONFIG_HOME")
	}
	out := stdio.Stdout
	if *all {
		n := len(creds.Servers)
		if err := (credentials{}).save(path); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "Logged out of every server (%d stored %s forgotten).\n", n, map[bool]string{true: "key", false: "keys"}[n == 1])
		return err
	}
	srv := serverKey(firstNonEmpty(*server, creds.Current))
	e, ok := creds.Servers[srv]
	if srv == "" || !ok {
		_, err := fmt.Fprintf(out, "Not logged in to %s.\n", visible(firstNonEmpty(srv, "any server")))
		return err
	}
	delete(creds.Servers, srv)
	if creds.Current == srv {
		creds.Current = ""
	}
	if err := creds.save(path); err != nil {
		return err
	}
	revoke := ""
	if e.KeyID != "" {
		revoke = " ('astrabox key revoke " + e.KeyID + "' revokes it)"
	}
	_, err = fmt.Fprintf(out, "Logged out of %s: its key is forgotten here, not revoked%s.\n", visible(srv), revoke)
	return err
}
