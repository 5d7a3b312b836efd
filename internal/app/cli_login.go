package app

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/identity"
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

// credential is what login stored for one server: an API key, pasted or
// given, or made for the CLI when signing in through the browser.
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

// runLogin is `astrabox login [--server URL] [--key KEY | --browser]`:
// it checks the key, pasted, given or obtained through the browser
// (browserKey), with the server (GET /api/v1/user/current) and stores it
// for that server in the credentials file; the server becomes the one
// commands use when given none.
func runLogin(ctx context.Context, args []string, stdio IO, env Env) error {
	const usage = "usage: astrabox login [--server URL] [--key KEY | --browser [--timeout 5m]]"
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage+"\n\n"+
			"Stores an API key for a server, checked with the server first, in your credentials file; commands use it\n"+
			"when given no --api-key and no $ASTRABOX_API_KEY. With no --key the key is read from stdin (paste it;\n"+
			"a terminal does not show it).\n\n"+
			"With --browser you sign in through your browser instead: the server sends you through its OpenID Connect\n"+
			"provider (it needs that set up: docs/sign-in.md; without it the browser shows FORBIDDEN), makes a key of\n"+
			"yours for this computer once you confirm, and your browser hands it to this command on a loopback port,\n"+
			"so the browser must run on this computer. $ASTRABOX_BROWSER is the command that opens the address\n"+
			"(default xdg-open, or open on macOS; none: only print it).\n\nflags:\n")
		fs.PrintDefaults()
	}
	server := fs.String("server", env("ASTRABOX_URL"), "the server ($ASTRABOX_URL; default: the server of the last login, else "+defaultServer+")")
	key := fs.String("key", "", "the API key (default: read from stdin; on the command line, other users of this machine may see it)")
	browser := fs.Bool("browser", false, "sign in through your browser and the server's OpenID Connect provider, rather than with a key")
	timeout := fs.Duration("timeout", 5*time.Minute, "with --browser: how long to wait for the browser to sign in")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (%s)", fs.Args(), usage)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *browser && set["key"]:
		return fmt.Errorf("--browser and --key exclude each other (%s)", usage)
	case set["timeout"] && !*browser:
		return fmt.Errorf("--timeout goes with --browser (%s)", usage)
	case *browser && *timeout <= 0:
		return errors.New("--timeout must be positive")
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
	// The key: through the browser, given, or pasted.
	k := strings.TrimSpace(*key)
	switch {
	case *browser:
		if k, err = browserKey(ctx, stdio, env, srv, *timeout); err != nil {
			return err
		}
	case k == "":
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
	who := cu.User.ID
	if cu.User.Email != "" {
		who += " <" + cu.User.Email + ">"
	}
	fmt.Fprintf(stdio.Stdout, "Logged in to %s as %s (%s; scopes %s; %s).\nThe key is stored in %s.\n", visible(srv), visible(who),
		visible(cu.User.Role), visible(strings.Join(cu.Scopes, ", ")), keyName(cu.KeyID), path)
	if *browser && cu.KeyID != "" {
		fmt.Fprintf(stdio.Stdout, "It was made for this computer: 'astrabox key ls' shows it, 'astrabox key revoke %s' revokes it.\n", cu.KeyID)
	}
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

// browserKey signs in through the browser: it listens on a loopback port,
// has the browser open the server's GET /api/v1/auth/cli?port=P&state=S
// (the server signs the person in through its OpenID Connect provider,
// asks them to confirm and makes a key of theirs) and waits, at most
// timeout, for the browser to hand the key over: a form, state and key,
// POSTed to http://127.0.0.1:P/callback. The state, random, is what tells
// this sign-in's hand-over from anything else that reaches the port.
func browserKey(ctx context.Context, stdio IO, env Env, srv string, timeout time.Duration) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen on a loopback port for the browser: %w", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if port < 1024 {
		return "", fmt.Errorf("the system gave loopback port %d, and the server takes 1024-65535", port)
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	cb := &callback{state: base64.RawURLEncoding.EncodeToString(b[:]), host: "127.0.0.1:" + strconv.Itoa(port),
		got: make(chan string, 1), bad: make(chan error, 1)}
	hs := &http.Server{Handler: cb, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = hs.Serve(l) }()
	defer func() {
		// The browser gets its page before the port closes.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			_ = hs.Close()
		}
	}()

	addr := srv + "/api/v1/auth/cli?" + url.Values{"port": {strconv.Itoa(port)}, "state": {cb.state}}.Encode()
	open := stdio.OpenBrowser
	if open == nil {
		open = systemBrowser(env)
	}
	opened := make(chan error, 1)
	if open == nil {
		fmt.Fprintf(stdio.Stderr, "To sign in to %s, open this address in a browser on this computer:\n\n  %s\n\n", visible(srv), addr)
	} else {
		fmt.Fprintf(stdio.Stderr, "Signing in to %s in your browser. If it does not open, open this address in a browser on this computer:\n\n  %s\n\n",
			visible(srv), addr)
		go func() { opened <- open(addr) }()
	}
	fmt.Fprintf(stdio.Stderr, "Waiting for the browser (at most %s)...\n", timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case k := <-cb.got:
			return k, nil
		case err := <-cb.bad:
			return "", err
		case err := <-opened:
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "note: could not open a browser (%s); open the address above yourself.\n", visible(err.Error()))
			}
		case <-timer.C:
			return "", fmt.Errorf("no sign-in came back from the browser in %s; nothing was stored (browser sign-in needs the server's "+
				"OpenID Connect setup, docs/sign-in.md: otherwise log in with a key)", timeout)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// systemBrowser returns what opens a URL in the user's browser:
// $ASTRABOX_BROWSER (a command and its arguments, the URL added last),
// else xdg-open, or open on macOS; nil when $ASTRABOX_BROWSER is "none".
func systemBrowser(env Env) func(string) error {
	cmd := strings.Fields(env("ASTRABOX_BROWSER"))
	switch {
	case len(cmd) == 1 && cmd[0] == "none":
		return nil
	case len(cmd) == 0 && runtime.GOOS == "darwin":
		cmd = []string{"open"}
	case len(cmd) == 0:
		cmd = []string{"xdg-open"}
	}
	return func(u string) error {
		// It may run as long as the browser does: its error, if any,
		// arrives while login waits, or never. It gets no pipe of ours,
		// which a browser it starts would outlive.
		if err := exec.Command(cmd[0], append(cmd[1:], u)...).Run(); err != nil {
			return fmt.Errorf("%s: %w", cmd[0], err)
		}
		return nil
	}
}

// callback is the loopback port's handler: it takes one POST /callback,
// a form with this sign-in's state and a key, and answers the browser
// with a page that says it may close the tab (the key is not on it).
type callback struct {
	state, host string
	taken       atomic.Bool
	got         chan string // the key
	bad         chan error  // a hand-over of this sign-in without a key
}

// maxCallbackForm bounds the hand-over's form.
const maxCallbackForm = 16 << 10

func (cb *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.URL.Path != "/callback" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST", http.StatusMethodNotAllowed)
		return
	}
	// The browser posts to 127.0.0.1:P itself; any other name for this
	// port (a rebound DNS name) is another site's page.
	if r.Host != cb.host {
		http.Error(w, "not this address", http.StatusMisdirectedRequest)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		http.Error(w, "a form only", http.StatusUnsupportedMediaType)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxCallbackForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "a malformed form", http.StatusBadRequest)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("state")), []byte(cb.state)) != 1 {
		http.Error(w, "this is not the sign-in astrabox login is waiting for", http.StatusBadRequest)
		return
	}
	if !cb.taken.CompareAndSwap(false, true) {
		http.Error(w, "astrabox login already has its key", http.StatusConflict)
		return
	}
	key := r.PostForm.Get("key")
	if _, _, ok := identity.ParseKey(key); !ok {
		http.Error(w, "the server handed over no API key", http.StatusBadRequest)
		cb.bad <- errors.New("the server handed over something that is not an API key; nothing was stored")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	_, _ = io.WriteString(w, signedInPage)
	cb.got <- key
}

// signedInPage is the browser's answer once the CLI has the key.
const signedInPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>AstraBox: signed in</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;color:#1d2330}</style></head><body>
<h1>Signed in; you can close this tab</h1>
<p>The <code>astrabox</code> command has its key and checks it with the server.</p>
</body></html>
`
