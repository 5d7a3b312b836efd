// Package console_test runs the web console's end-to-end suites
// (e2e/console.test.mjs, then e2e/identity.test.mjs) in a real headless
// Chromium against a whole AstraBox server: native sandboxes (root), the
// scripted fake model and sign-in through a real OpenID Connect provider
// (oidc-provider from npm, with its own login pages).
// It installs the pinned npm packages (npm ci), builds the console into a
// temporary directory and serves that build in front of the server's API,
// so it tests the source as it is, whatever the binary embeds. Node's TAP
// summary must count every test passed; the screenshots stay in
// CONSOLE_SCREENSHOTS (default: test-results/ here).
//
// It needs root, node, npm and chromium; outside CI it skips without them.
package console_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/identity/oidc"
	"github.com/astrabox/astrabox/identity/oidc/oidctest"
	"github.com/astrabox/astrabox/internal/console"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/nodetest"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// nodeTests is how many tests e2e/console.test.mjs holds, identityTests
// how many e2e/identity.test.mjs holds.
const (
	nodeTests     = 10
	identityTests = 8
)

// What the browser sends and what the fake model answers to each.
const (
	toolInput    = "Run `" + toolCommand + "` and tell me what it printed."
	holdInput    = "How does a reply survive a reload?"
	approveInput = "Run `" + approveCommand + "`, please."

	toolCommand    = "echo console-tool-output"
	toolOutput     = "console-tool-output"
	toolText       = "The command printed **console-tool-output**, as asked."
	holdText       = "Streaming resumes after the reload and carries on to the end."
	holdFirst      = "Streamin" // what the fake model sends before it holds: its first piece of 8 runes
	approveCommand = "echo approved-output"
	approveOutput  = "approved-output"
	approveText    = "The approved command ran."
)

// script routes every model request by the conversation's last user
// message: an input that asks for a command first calls the shell tool
// and, with the tool's result, answers in text. The held reply stops after its first piece
// until gate is closed.
func script(gate <-chan struct{}) []fakemodel.Reply {
	route := fakemodel.Func(func(req fakemodel.Request) fakemodel.Reply {
		afterTool := req.Last().Role == "tool"
		var last string
		for _, m := range req.Body.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		switch {
		case last == toolInput && !afterTool:
			return fakemodel.Call("shell", map[string]any{"command": toolCommand})
		case last == toolInput:
			return fakemodel.Text(toolText).WithReasoning("The user wants the command run; it ran.")
		case last == holdInput:
			return fakemodel.Text(holdText).HoldUntil(gate)
		case last == approveInput && !afterTool:
			return fakemodel.Call("shell", map[string]any{"command": approveCommand})
		case last == approveInput:
			return fakemodel.Text(approveText)
		}
		return fakemodel.Text("OK")
	})
	return slices.Repeat([]fakemodel.Reply{route}, 50)
}

// TestConsoleUnits runs the components' and modules' unit tests (vitest,
// in jsdom).
func TestConsoleUnits(t *testing.T) {
	pkgDir, ctx := install(t)
	nodetest.NPM(ctx, t, pkgDir, "test")
}

// TestConsoleInChromium signs in with the server's key, chats (a tool
// call, a reply resumed after a reload, an approval), checks a model
// endpoint, keeps a secret in a vault attached to an Agent, runs a command
// in a terminal and moves a file in and out; then people sign in through
// the identity provider's login page, make API keys, share an Agent,
// administer users and sign out, in Chromium.
func TestConsoleInChromium(t *testing.T) {
	testenv.NeedRoot(t)
	chromium := findChromium()
	testenv.Need(t, chromium != "", "chromium (apt-get install chromium)")
	pkgDir, ctx := install(t)
	build := t.TempDir()
	nodetest.NPM(ctx, t, pkgDir, "run", "build", "--", "--outDir", build, "--emptyOutDir", "--logLevel", "warn")

	gate := make(chan struct{})
	var release sync.Once
	releaseGate := func() { release.Do(func() { close(gate) }) }
	t.Cleanup(releaseGate)

	// The console's address comes first: the identity provider sends the
	// browser back to its callback there.
	siteListener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	siteURL := "http://" + siteListener.Addr().String()
	callback := siteURL + "/api/v1/auth/callback"
	idp := oidctest.Start(t, oidctest.Client{ClientID: "astrabox-console", ClientSecret: "console-idp-secret", RedirectURIs: []string{callback}})
	prov, err := oidc.New(oidc.Config{Issuer: idp.Issuer, ClientID: "astrabox-console", ClientSecret: "console-idp-secret",
		RedirectURL: callback, Scopes: []string{"email", "profile", "groups"}})
	if err != nil {
		t.Fatal(err)
	}
	env := servertest.New(t, servertest.Options{Backend: "native", Script: script(gate),
		Web: &identityapi.Web{OIDC: prov, AdminGroups: []string{oidctest.AdminGroup}, DefaultRole: identity.RoleMember}})
	env.Agent("auto", nil) // "coder" on profile "test"
	env.Must(201, "POST", "/api/v1/agents", map[string]any{"name": "careful", "engine_kind": "astrabox", "runtime_profile": "test",
		"model": "fake-1", "permission_mode": "ask", "instructions": "Ask before running anything."}, nil)

	// The fresh build in front of the server's API, as api.Server mounts
	// the embedded one.
	ui := console.New(os.DirFS(build))
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET "+console.AssetPrefix, ui)
	mux.Handle("/", proxyTo(t, env.URL))
	site := httptest.NewUnstartedServer(mux)
	site.Listener.Close()
	site.Listener = siteListener
	site.Start()
	t.Cleanup(site.Close)

	ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/release" {
			http.NotFound(w, r)
			return
		}
		releaseGate()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ctl.Close)

	shots := os.Getenv("CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(pkgDir, "test-results")
	}
	nodetest.RunTAP(ctx, t, pkgDir, "e2e/console.test.mjs", nodeTests, map[string]string{
		"CONSOLE_URL":    site.URL,
		"API_KEY":        servertest.Key,
		"CHROMIUM":       chromium,
		"RELEASE_URL":    ctl.URL + "/release",
		"SCREENSHOT_DIR": shots,
		"TOOL_INPUT":     toolInput,
		"TOOL_OUTPUT":    toolOutput,
		"TOOL_TEXT":      strings.ReplaceAll(toolText, "**", ""),
		"HOLD_INPUT":     holdInput,
		"HOLD_FIRST":     holdFirst,
		"HOLD_TEXT":      holdText,
		"APPROVE_INPUT":  approveInput,
		"APPROVE_OUTPUT": approveOutput,
		"APPROVE_TEXT":   approveText,
		"NO_COLOR":       "1",
	})
	nodetest.RunTAP(ctx, t, pkgDir, "e2e/identity.test.mjs", identityTests, map[string]string{
		"CONSOLE_URL":    site.URL,
		"API_KEY":        servertest.Key,
		"CHROMIUM":       chromium,
		"ISSUER":         idp.Issuer,
		"SCREENSHOT_DIR": shots,
		"NO_COLOR":       "1",
	})
	t.Logf("screenshots in %s", shots)

	// What the browser showed is what the server recorded: each input once.
	inputs := map[string]int{}
	for _, req := range env.Model.Requests() {
		if req.Last().Role == "user" {
			inputs[req.Last().Content]++
		}
	}
	for _, in := range []string{toolInput, holdInput, approveInput} {
		if n := inputs[in]; n != 1 {
			t.Errorf("the model was asked %d times to answer %q, want once", n, in)
		}
	}
}

// proxyTo forwards to the server at base, streaming (SSE) and upgrading
// (WebSocket) as the server itself would answer.
func proxyTo(t *testing.T, base string) http.Handler {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	// A stream the browser leaves (a reload, a closed terminal) is no error.
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() == nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	}
	return rp
}

var (
	installOnce sync.Once
	installErr  error
)

// install installs the pinned npm packages once per test binary (npm ci)
// and returns the package's directory and a context bounded by the test's
// deadline.
func install(t *testing.T) (string, context.Context) {
	t.Helper()
	testenv.NeedCommand(t, "node")
	testenv.NeedCommand(t, "npm")
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodetest.Timeout(t, 10*time.Minute))
	t.Cleanup(cancel)
	installOnce.Do(func() {
		installErr = nodetest.RunNPM(ctx, pkgDir, "ci", "--no-audit", "--no-fund")
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
	return pkgDir, ctx
}

// findChromium returns the system's Chromium, or "" when there is none.
func findChromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}
