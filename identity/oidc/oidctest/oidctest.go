// Package oidctest starts a real OpenID Connect provider for tests (a test
// helper, not a product feature): oidc-provider from npm, OpenID
// Certified, with its development login pages, on loopback
// (../testdata/idp). Any login and password sign in; the login names the
// account, and a login starting with "admin" is in the group
// "astrabox-admins". Login drives those pages the way a browser's user
// would, for tests without a browser.
package oidctest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/nodetest"
	"github.com/astrabox/astrabox/internal/testenv"
)

// AdminGroup is the group of the accounts whose login starts with "admin".
const AdminGroup = "astrabox-admins"

// Client is a client registered with the provider. A ClientID ending in
// "-short" gets ID tokens that expire after a second.
type Client struct {
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret"`
	RedirectURIs []string `json:"redirect_uris"`
}

// IdP is a running provider.
type IdP struct {
	// Issuer is its issuer URL (http://127.0.0.1:port).
	Issuer string
}

var npmOnce sync.Once

// dir is the provider's package directory.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "idp")
}

// Start installs the provider's pinned npm packages (once per test binary)
// and runs it with clients until t ends. Without node and npm it skips t
// (outside CI) or fails it (in CI).
func Start(t testing.TB, clients ...Client) *IdP {
	t.Helper()
	testenv.NeedCommand(t, "node")
	testenv.NeedCommand(t, "npm")
	var npmErr error
	npmOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		npmErr = nodetest.RunNPM(ctx, dir(), "ci", "--no-audit", "--no-fund")
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cj, _ := json.Marshal(clients)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", "idp.mjs")
	cmd.Dir = dir()
	cmd.Env = append(cmd.Environ(), fmt.Sprintf("IDP_PORT=%d", port), "IDP_CLIENTS="+string(cj))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if issuer, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				ready <- issuer
			}
		}
	}()
	select {
	case issuer := <-ready:
		return &IdP{Issuer: issuer}
	case <-time.After(30 * time.Second):
		t.Fatal("the test identity provider did not start in 30 s")
	}
	return nil
}

// formAction finds the action of the page's form.
var formAction = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)

// Login follows start (a URL that leads to the provider's authorization
// endpoint, e.g. AstraBox's /api/v1/auth/login) with client c (which
// must have a cookie jar and must not follow redirects), signs in as
// login on the provider's login page, consents, and returns the last
// response: the redirect the provider's flow ends with once it leaves the
// provider (to the client's redirect URI, or on from there).
func (idp *IdP) Login(t testing.TB, c *http.Client, start, login string) *http.Response {
	t.Helper()
	resp := idp.follow(t, c, http.MethodGet, start, nil)
	for range 10 {
		if resp.StatusCode != http.StatusOK {
			return resp // left the provider's pages
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := formAction.FindSubmatch(page)
		if m == nil {
			t.Fatalf("the provider's page has no form: %s", page)
		}
		action, _ := url.Parse(resp.Request.URL.String())
		action, _ = action.Parse(string(m[1]))
		form := url.Values{"prompt": {"consent"}}
		if strings.Contains(string(page), `name="login"`) {
			form = url.Values{"prompt": {"login"}, "login": {login}, "password": {"any"}}
		}
		resp = idp.follow(t, c, http.MethodPost, action.String(), form)
	}
	t.Fatal("the provider's pages did not end in 10 steps")
	return nil
}

// follow makes a request and follows redirects into and within the
// provider, returning the first answer that is a page (of the provider or
// not) or a redirect that leaves the provider.
func (idp *IdP) follow(t testing.TB, c *http.Client, method, u string, form url.Values) *http.Response {
	t.Helper()
	iss, _ := url.Parse(idp.Issuer)
	for range 20 {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, u, body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		if resp.StatusCode < 300 || resp.StatusCode > 399 {
			return resp
		}
		next, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Request.URL.Host == iss.Host && next.Host != iss.Host {
			return resp // leaving the provider
		}
		resp.Body.Close()
		method, u, form = http.MethodGet, next.String(), nil
	}
	t.Fatalf("too many redirects from %s", u)
	return nil
}
