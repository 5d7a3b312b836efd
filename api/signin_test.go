package api_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/identity/oidc"
	"github.com/astrabox/astrabox/identity/oidc/oidctest"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
)

// signInEnv is a server offering sign-in through a real provider, and a
// second replica on the same store.
type signInEnv struct {
	url, url2 string
	idp       *oidctest.IdP
}

func newSignInEnv(t *testing.T) *signInEnv {
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
	dbPath := t.TempDir() + "/astrabox.db"
	signingKey := []byte("0123456789abcdef0123456789abcdef")
	start := func(l net.Listener) string {
		st, err := sqlite.Open(context.Background(), dbPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{os.Args[0]}, Env: []string{"ASTRABOX_TEST_MAIN=1"}})
		if err != nil {
			t.Fatal(err)
		}
		srv := newServer(t, server.Config{Store: st, Backends: map[string]sandbox.Provider{"process": p},
			Installed: []string{"process"}, DefaultBackend: "process", SigningKey: signingKey,
			Web: &identityapi.Web{OIDC: prov, AdminGroups: []string{oidctest.AdminGroup}, DefaultRole: identity.RoleMember}})
		if err := identity.EnsureBootstrapUser(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewUnstartedServer(srv.Handler)
		if l != nil {
			hs.Listener.Close()
			hs.Listener = l
		}
		hs.Start()
		t.Cleanup(hs.Close)
		return hs.URL
	}
	return &signInEnv{url: start(l), url2: start(nil), idp: idp}
}

// browser is a cookie-keeping client that does not follow redirects.
func browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout: 30 * time.Second}
}

// signIn signs b in as login through the provider's pages, starting at
// /api/v1/auth/login?next=next, and returns the callback's URL and its
// answer.
func (e *signInEnv) signIn(t *testing.T, b *http.Client, login, next string) (string, *http.Response) {
	t.Helper()
	resp := e.idp.Login(t, b, e.url+"/api/v1/auth/login?next="+url.QueryEscape(next), login)
	resp.Body.Close()
	callback := resp.Header.Get("Location")
	if !strings.HasPrefix(callback, e.url+"/api/v1/auth/callback?") {
		t.Fatalf("the provider sent the browser to %q", callback)
	}
	return callback, get(t, b, callback, nil)
}

func get(t *testing.T, c *http.Client, u string, hdr map[string]string) *http.Response {
	t.Helper()
	return do(t, c, http.MethodGet, u, hdr)
}

func do(t *testing.T, c *http.Client, method, u string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(`{"name":"from the browser"}`))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == identityapi.SessionCookie && c.Value != "" {
			return c
		}
	}
	return nil
}

func TestSignInWithOpenIDConnect(t *testing.T) {
	e := newSignInEnv(t)
	b := browser()

	// A person signs in through the provider's own login page.
	_, resp := e.signIn(t, b, "alice", "/#/sessions")
	c := sessionCookie(resp)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/#/sessions" || c == nil {
		t.Fatalf("callback: %d to %q, cookie %v", resp.StatusCode, resp.Header.Get("Location"), c)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Lax, Path=/", c)
	}
	if r := get(t, b, e.url+"/api/v1/user/current", nil); r.StatusCode != 200 {
		t.Fatalf("current user by cookie: %d", r.StatusCode)
	}
	_, cur := callAsCookie(t, b, e.url+"/api/v1/user/current")
	u := cur["user"].(map[string]any)
	if u["kind"] != "human" || u["subject"] != "alice" || u["email"] != "alice@example.com" || u["role"] != "member" {
		t.Errorf("signed-in user = %v", u)
	}

	// Cookie-authenticated writes need the CSRF header and this origin.
	keys := e.url + "/api/v1/user/api-keys"
	if r := do(t, b, "POST", keys, nil); r.StatusCode != 403 {
		t.Errorf("a cookie write without the CSRF header: %d, want 403", r.StatusCode)
	}
	if r := do(t, b, "POST", keys, map[string]string{identityapi.CSRFHeader: "1", "Origin": "https://evil.example"}); r.StatusCode != 403 {
		t.Errorf("a cookie write from another origin: %d, want 403", r.StatusCode)
	}
	if r := do(t, b, "POST", keys, map[string]string{identityapi.CSRFHeader: "1", "Origin": e.url}); r.StatusCode != 201 {
		t.Errorf("a cookie write from the console: %d, want 201", r.StatusCode)
	}
	// The cookie is no key: the proxy does not take it.
	if r := get(t, b, e.url+"/v1/sandboxes/x/proxy/8080/", nil); r.StatusCode != 401 {
		t.Errorf("the proxy with a session cookie: %d, want 401", r.StatusCode)
	}

	// The provider's groups make an administrator.
	ab := browser()
	e.signIn(t, ab, "admin-ann", "/")
	if r := get(t, ab, e.url+"/api/v1/admin/users", nil); r.StatusCode != 200 {
		t.Errorf("admin-ann lists users: %d", r.StatusCode)
	}

	// next is a path of this origin, never another site.
	for _, next := range []string{"https://evil.example/x", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"} {
		_, r := e.signIn(t, browser(), "bob", next)
		if r.Header.Get("Location") != "/" {
			t.Errorf("next=%q sent the browser to %q, want /", next, r.Header.Get("Location"))
		}
	}

	// A replayed callback (its flow cookie and code, copied from carol's
	// browser) signs nobody in.
	rb := browser()
	resp = e.idp.Login(t, rb, e.url+"/api/v1/auth/login", "carol")
	resp.Body.Close()
	callback := resp.Header.Get("Location")
	u2, _ := url.Parse(e.url)
	cbURL, _ := url.Parse(callback)
	flowCookies := rb.Jar.Cookies(cbURL)
	if r := get(t, rb, callback, nil); sessionCookie(r) == nil {
		t.Fatal("carol did not sign in")
	}
	replay := browser()
	replay.Jar.SetCookies(cbURL, flowCookies)
	if r := get(t, replay, callback, nil); sessionCookie(r) != nil || !strings.Contains(r.Header.Get("Location"), "sign_in_error=") {
		t.Errorf("a replayed callback: %d to %q", r.StatusCode, r.Header.Get("Location"))
	}
	var flow *http.Cookie
	for _, c := range flowCookies {
		if c.Name == "astrabox_flow" {
			flow = c
		}
	}
	if flow == nil {
		t.Fatalf("no flow cookie among %v", flowCookies)
	}
	// A forged flow cookie is refused before the provider is asked.
	forged := browser()
	forged.Jar.SetCookies(u2, []*http.Cookie{{Name: "astrabox_flow", Value: flow.Value[:len(flow.Value)-2] + "xx", Path: "/api/v1/auth/"}})
	if r := get(t, forged, callback, nil); r.Header.Get("Location") != "/?sign_in_error=bad_flow" {
		t.Errorf("a forged flow cookie: to %q", r.Header.Get("Location"))
	}
	// A forged session cookie is nobody.
	if r := get(t, browserWith(u2, "astrabox_session", "forged-value"), e.url+"/api/v1/user/current", nil); r.StatusCode != 401 {
		t.Errorf("a forged session cookie: %d, want 401", r.StatusCode)
	}

	// Signing out ends the session on every replica.
	if r := get(t, browserWith(u2, c.Name, c.Value), e.url2+"/api/v1/user/current", nil); r.StatusCode != 200 {
		t.Fatalf("the second replica knows the session: %d", r.StatusCode)
	}
	if r := do(t, b, "POST", e.url+"/api/v1/auth/logout", map[string]string{identityapi.CSRFHeader: "1"}); r.StatusCode != 204 {
		t.Fatalf("logout: %d", r.StatusCode)
	}
	if r := get(t, browserWith(u2, c.Name, c.Value), e.url+"/api/v1/user/current", nil); r.StatusCode != 401 {
		t.Errorf("the old cookie after sign-out: %d, want 401", r.StatusCode)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		r := get(t, browserWith(u2, c.Name, c.Value), e.url2+"/api/v1/user/current", nil)
		if r.StatusCode == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second replica still takes the signed-out cookie: %d", r.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// browserWith is a client carrying one cookie for u.
func browserWith(u *url.URL, name, value string) *http.Client {
	b := browser()
	b.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/"}})
	return b
}

func callAsCookie(t *testing.T, b *http.Client, u string) (int, map[string]any) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestCLISignInThroughTheBrowser: `astrabox login --browser` asks the
// server, through the person's browser, for a key of theirs, which the
// browser hands to the CLI's loopback port in a form (never in a URL).
func TestCLISignInThroughTheBrowser(t *testing.T) {
	e := newSignInEnv(t)
	b := browser()
	state := "cli-state-0123456789"
	start := e.url + "/api/v1/auth/cli?port=40111&state=" + state
	// Not signed in: through the provider and back to the CLI page.
	resp := e.idp.Login(t, b, start, "frank")
	resp.Body.Close()
	cb := get(t, b, resp.Header.Get("Location"), nil)
	if cb.Header.Get("Location") != "/api/v1/auth/cli?port=40111&state="+state {
		t.Fatalf("after sign-in the browser goes to %q", cb.Header.Get("Location"))
	}
	page := getBody(t, b, e.url+cb.Header.Get("Location"))
	token := formValue(t, page, "token")
	post := func(form url.Values, origin string) (int, string) {
		req, _ := http.NewRequest("POST", e.url+"/api/v1/auth/cli", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	form := url.Values{"port": {"40111"}, "state": {state}, "token": {token}}
	if st, _ := post(url.Values{"port": {"40111"}, "state": {state}, "token": {"forged"}}, e.url); st != 403 {
		t.Errorf("a confirmation without this page's token: %d, want 403", st)
	}
	if st, _ := post(form, "https://evil.example"); st != 403 {
		t.Errorf("a confirmation from another origin: %d, want 403", st)
	}
	// The token is bound to the CLI's port: a page cannot redirect the key.
	if st, _ := post(url.Values{"port": {"40112"}, "state": {state}, "token": {token}}, e.url); st != 403 {
		t.Errorf("this page's token for another port: %d, want 403", st)
	}
	st, handover := post(form, e.url)
	if st != 200 || !strings.Contains(handover, `action="http://127.0.0.1:40111/callback"`) || formValue(t, handover, "state") != state {
		t.Fatalf("hand-over: %d %s", st, handover)
	}
	key := formValue(t, handover, "key")
	st, cur := callAsURL(t, e.url, key, "/api/v1/user/current")
	if st != 200 || cur["user"].(map[string]any)["subject"] != "frank" {
		t.Errorf("the CLI's key: %d %v", st, cur)
	}
	// Without a browser session a POST is refused; a GET is sent to sign in.
	if r := do(t, browser(), "POST", start, nil); r.StatusCode != 401 {
		t.Errorf("a confirmation without a session: %d, want 401", r.StatusCode)
	}
}

func getBody(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

// formValue returns the value of the page's hidden input name.
func formValue(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no input %s in %s", name, page)
	}
	return html.UnescapeString(m[1])
}

func callAsURL(t *testing.T, base, key, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
