package app

import (
	"context"
	"crypto/rand"
	"errors"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/identity/oidc"
	"github.com/astrabox/astrabox/identity/oidc/oidctest"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// newSignInServer starts a server that signs people in through a real
// OpenID Connect provider (as api's signin_test does), and the provider.
func newSignInServer(t *testing.T) (string, *oidctest.IdP) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	idp := oidctest.Start(t, oidctest.Client{ClientID: "astrabox", ClientSecret: "idp-secret",
		RedirectURIs: []string{base + "/api/v1/auth/callback"}})
	prov, err := oidc.New(oidc.Config{Issuer: idp.Issuer, ClientID: "astrabox", ClientSecret: "idp-secret",
		RedirectURL: base + "/api/v1/auth/callback", Scopes: []string{"email", "profile", "groups"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "astrabox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// No box is made: the backend is never asked to run its command.
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{os.Args[0]}})
	if err != nil {
		t.Fatal(err)
	}
	key, signing := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(key)
	_, _ = rand.Read(signing)
	ring, err := vault.New(key)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Backends: map[string]sandbox.Provider{"process": p}, Installed: []string{"process"},
		DefaultBackend: "process", APIKeyHash: api.HashKey("test-api-key"), Vault: ring, SigningKey: signing,
		Web: &identityapi.Web{OIDC: prov, AdminGroups: []string{oidctest.AdminGroup}, DefaultRole: identity.RoleMember}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler)
	hs.Listener.Close()
	hs.Listener = l
	hs.Start()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { hs.Close(); srv.Close(); cancel() })
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return hs.URL, idp
}

// browserClient is a cookie-keeping client that does not follow
// redirects, as oidctest's Login wants.
func browserClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout: 30 * time.Second}
}

// loginRun is `astrabox login ARGS` running in the background, its
// browser played by the test: Opened has each address it opened.
type loginRun struct {
	out, errOut *outBuffer
	done        chan int
	opened      chan string
}

func startLogin(t *testing.T, env Env, withOpener bool, args ...string) *loginRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	r := &loginRun{out: newOutBuffer(), errOut: newOutBuffer(), done: make(chan int, 1), opened: make(chan string, 1)}
	stdio := IO{Stdin: strings.NewReader(""), Stdout: r.out, Stderr: r.errOut}
	if withOpener {
		stdio.OpenBrowser = func(u string) error { r.opened <- u; return nil }
	}
	go func() { defer cancel(); r.done <- Main(ctx, append([]string{"login"}, args...), stdio, env) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// address is the address login opened, which it printed too.
func (r *loginRun) address(t *testing.T) string {
	t.Helper()
	select {
	case u := <-r.opened:
		if !strings.Contains(r.errOut.String(), "\n  "+u+"\n") {
			t.Errorf("login opened %s without printing it:\n%s", u, r.errOut.String())
		}
		return u
	case code := <-r.done:
		r.done <- code
		t.Fatalf("login ended (%d) before opening a browser:\n%s", code, r.errOut.String())
	case <-time.After(time.Minute):
		t.Fatal("login opened no browser in a minute")
	}
	return ""
}

// wait returns login's exit code.
func (r *loginRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.done:
		r.done <- code // for the cleanup
		return code
	case <-time.After(time.Minute):
		t.Fatalf("login did not end:\n%s", r.errOut.String())
	}
	return 0
}

// running fails the test if login has ended.
func (r *loginRun) running(t *testing.T) {
	t.Helper()
	select {
	case code := <-r.done:
		r.done <- code
		t.Fatalf("login ended (%d) rather than waiting:\n%s", code, r.errOut.String())
	case <-time.After(50 * time.Millisecond):
	}
}

// postForm posts form to u (with the content type ctype) and returns
// the status and the answer.
func postForm(t *testing.T, c *http.Client, u, ctype string, form url.Values, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const formType = "application/x-www-form-urlencoded"

// inputValue is the value of the page's input named name.
func inputValue(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no input %s in %s", name, page)
	}
	return html.UnescapeString(m[1])
}

// TestCLILoginBrowser: `astrabox login --browser` signs frank in through
// the server's OpenID Connect provider, in a browser the test plays; his
// browser hands the key the server made to login's loopback port, which
// takes only the hand-over of its own sign-in, and login stores the key.
func TestCLILoginBrowser(t *testing.T) {
	srvURL, idp := newSignInServer(t)
	home := t.TempDir()
	user := vars("HOME", home, "ASTRABOX_BROWSER", "/nonexistent/browser") // the injected opener wins
	path := filepath.Join(home, ".config", "astrabox", "credentials.json")
	run := startLogin(t, user, true, "--browser", "--server", srvURL)

	// The address: the server's CLI sign-in, a loopback port and a fresh
	// state of 24 random bytes.
	addr := run.address(t)
	u, err := url.Parse(addr)
	if err != nil || u.Path != "/api/v1/auth/cli" || !strings.HasPrefix(addr, srvURL+"/api/v1/auth/cli?") {
		t.Fatalf("login opened %q", addr)
	}
	port, _ := strconv.Atoi(u.Query().Get("port"))
	state := u.Query().Get("state")
	if port < 1024 || port > 65535 || !regexp.MustCompile(`^[A-Za-z0-9_-]{32}$`).MatchString(state) {
		t.Fatalf("port %d, state %q", port, state)
	}
	loopback := "http://127.0.0.1:" + strconv.Itoa(port)

	// What is not this sign-in's hand-over is refused, and login waits on.
	plain := &http.Client{Timeout: 10 * time.Second}
	someKey := "abx_aaaaaaaaaaaa_" + strings.Repeat("b", 52)
	if _, _, ok := identity.ParseKey(someKey); !ok {
		t.Fatal("someKey is no key's form")
	}
	for _, c := range []struct {
		name, path, ctype string
		form              url.Values
		want              int
	}{
		{"a wrong state", "/callback", formType, url.Values{"state": {otherState(state)}, "key": {someKey}}, 400},
		{"no state", "/callback", formType, url.Values{"key": {someKey}}, 400},
		{"the state in the URL", "/callback?state=" + state, formType, url.Values{"key": {someKey}}, 400},
		{"not a form", "/callback", "application/json", url.Values{"state": {state}, "key": {someKey}}, 415},
		{"another path", "/other", formType, url.Values{"state": {state}, "key": {someKey}}, 404},
	} {
		if st, body := postForm(t, plain, loopback+c.path, c.ctype, c.form); st != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.want)
		}
	}
	if resp, err := plain.Get(loopback + "/callback?state=" + url.QueryEscape(state) + "&key=" + someKey); err != nil || resp.StatusCode != 405 {
		t.Errorf("a GET: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}
	// Another name for the port (a rebound DNS name) is another site.
	req, _ := http.NewRequest(http.MethodPost, loopback+"/callback", strings.NewReader(url.Values{"state": {state}, "key": {someKey}}.Encode()))
	req.Header.Set("Content-Type", formType)
	req.Host = "evil.example:" + strconv.Itoa(port)
	if resp, err := plain.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a POST to another host name: %v %v, want 421", resp, err)
	} else {
		resp.Body.Close()
	}
	run.running(t)

	// The browser: not signed in, through the provider, then back to the
	// server's confirmation page.
	b := browserClient()
	resp := idp.Login(t, b, addr, "frank")
	resp.Body.Close()
	resp, err = b.Get(resp.Header.Get("Location")) // the server's callback
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	next := resp.Header.Get("Location")
	if next != u.RequestURI() {
		t.Fatalf("after sign-in the browser goes to %q, want %q", next, u.RequestURI())
	}
	resp, err = b.Get(srvURL + next)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the confirmation page: %d %s", resp.StatusCode, page)
	}
	// Frank confirms; the hand-over page posts state and key to login.
	confirm := url.Values{}
	for _, name := range []string{"port", "state", "token"} {
		confirm.Set(name, inputValue(t, string(page), name))
	}
	st, handover := postForm(t, b, srvURL+"/api/v1/auth/cli", formType, confirm, "Origin", srvURL)
	if st != 200 {
		t.Fatalf("confirming: %d %s", st, handover)
	}
	m := regexp.MustCompile(`<form[^>]*action="([^"]+)"`).FindStringSubmatch(handover)
	if m == nil || html.UnescapeString(m[1]) != loopback+"/callback" {
		t.Fatalf("the hand-over goes to %v, want %s/callback", m, loopback)
	}
	key := inputValue(t, handover, "key")
	give := url.Values{"state": {inputValue(t, handover, "state")}, "key": {key}}
	st, body := postForm(t, b, loopback+"/callback", formType, give, "Origin", "null")
	if st != 200 || !strings.Contains(body, "Signed in; you can close this tab") || strings.Contains(body, key) {
		t.Fatalf("the hand-over: %d %s", st, body)
	}

	if code := run.wait(t); code != 0 {
		t.Fatalf("login --browser: exit %d\nstdout: %s\nstderr: %s", code, run.out.String(), run.errOut.String())
	}
	kid := keyIDOf(key)
	for _, want := range []string{"Logged in to " + srvURL + " as usr_", "<frank@example.com> (member; scopes read, write; key " + kid + ").",
		"stored in " + path, "'astrabox key revoke " + kid + "' revokes it"} {
		if !strings.Contains(run.out.String(), want) {
			t.Errorf("login's stdout lacks %q:\n%s", want, run.out.String())
		}
	}
	if strings.Contains(run.out.String()+run.errOut.String(), key) {
		t.Error("login printed the key")
	}
	checkCredentialsFile(t, path, srvURL, key)
	cliStep{name: "whoami", args: []string{"whoami"}, stdout: []string{"user    usr_", "frank@example.com", "role    member", "kind    human",
		"key     " + kid, "server  " + srvURL}}.check(t, vars("HOME", home))
}

// TestCLILoginBrowserRefusals: --browser waits a bounded time, takes no
// hand-over without a key, and goes without --key; $ASTRABOX_BROWSER
// opens the address, or with "none" login only prints it. No server is
// reached: nothing here gets as far as asking one.
func TestCLILoginBrowserRefusals(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".config", "astrabox", "credentials.json")
	noServer := "http://127.0.0.1:1"

	// The browser never comes back.
	r := startLogin(t, vars("HOME", home), true, "--browser", "--server", noServer, "--timeout", "1s")
	r.address(t)
	if code := r.wait(t); code != 1 || !strings.Contains(r.errOut.String(), "astrabox login: no sign-in came back from the browser in 1s; nothing was stored") ||
		!strings.Contains(r.errOut.String(), "docs/sign-in.md") {
		t.Errorf("a timeout: exit %d\n%s", code, r.errOut.String())
	}

	// A hand-over of this sign-in without a key ends it.
	r = startLogin(t, vars("HOME", home), true, "--browser", "--server", noServer)
	u, _ := url.Parse(r.address(t))
	st, _ := postForm(t, http.DefaultClient, "http://127.0.0.1:"+u.Query().Get("port")+"/callback", formType,
		url.Values{"state": {u.Query().Get("state")}, "key": {"not-a-key"}})
	if code := r.wait(t); st != 400 || code != 1 || !strings.Contains(r.errOut.String(), "not an API key; nothing was stored") {
		t.Errorf("a hand-over without a key: %d, exit %d\n%s", st, code, r.errOut.String())
	}

	// $ASTRABOX_BROWSER is run with the address; "none" runs nothing.
	dir := t.TempDir()
	script, got := filepath.Join(dir, "browser"), filepath.Join(dir, "opened")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s' \"$2\" > "+got+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = startLogin(t, vars("HOME", home, "ASTRABOX_BROWSER", script+" --new-tab"), false, "--browser", "--server", noServer, "--timeout", "1s")
	r.wait(t)
	if b, err := os.ReadFile(got); err != nil || !strings.HasPrefix(string(b), noServer+"/api/v1/auth/cli?port=") ||
		!strings.Contains(r.errOut.String(), "\n  "+string(b)+"\n") {
		t.Errorf("$ASTRABOX_BROWSER opened %q (%v):\n%s", b, err, r.errOut.String())
	}
	r = startLogin(t, vars("HOME", home, "ASTRABOX_BROWSER", "/nonexistent/browser"), false, "--browser", "--server", noServer, "--timeout", "1s")
	r.wait(t)
	if !strings.Contains(r.errOut.String(), "note: could not open a browser (/nonexistent/browser: ") {
		t.Errorf("a browser that does not start:\n%s", r.errOut.String())
	}
	r = startLogin(t, vars("HOME", home, "ASTRABOX_BROWSER", "none"), false, "--browser", "--server", noServer, "--timeout", "1s")
	r.wait(t)
	if !strings.Contains(r.errOut.String(), "open this address in a browser on this computer:\n\n  "+noServer+"/api/v1/auth/cli?port=") ||
		strings.Contains(r.errOut.String(), "could not open") {
		t.Errorf("ASTRABOX_BROWSER=none:\n%s", r.errOut.String())
	}

	runSteps(t, vars("HOME", home), []cliStep{
		{name: "--browser and --key", args: []string{"login", "--browser", "--key", "abx_x", "--server", noServer}, code: 1,
			stderr: []string{"--browser and --key exclude each other"}},
		{name: "--timeout without --browser", args: []string{"login", "--timeout", "1m", "--key", "abx_x", "--server", noServer}, code: 1,
			stderr: []string{"--timeout goes with --browser"}},
		{name: "--timeout 0", args: []string{"login", "--browser", "--timeout", "0s", "--server", noServer}, code: 1,
			stderr: []string{"--timeout must be positive"}},
		{name: "help", args: []string{"login", "--help"}, stderr: []string{"--browser", "docs/sign-in.md", "ASTRABOX_BROWSER"}},
	})
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a login that did not end stored something: %v", err)
	}
}

// otherState is state with its last character changed (whatever it was).
func otherState(state string) string {
	last := byte('x')
	if state[len(state)-1] == last {
		last = 'y'
	}
	return state[:len(state)-1] + string(last)
}
