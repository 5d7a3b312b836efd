package app

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
)

// outBuffer is an output that tests may read while a command writes it;
// every write wakes waitFor.
type outBuffer struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{}
}

func newOutBuffer() *outBuffer { return &outBuffer{changed: make(chan struct{}, 1)} }

func (o *outBuffer) Write(p []byte) (int, error) {
	o.mu.Lock()
	o.b.Write(p)
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (o *outBuffer) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor blocks until the output holds want n times, failing the test
// at the deadline.
func (o *outBuffer) waitFor(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for strings.Count(o.String(), want) < n {
		select {
		case <-o.changed:
		case <-deadline.C:
			t.Fatalf("output never held %q %d times:\n%s", want, n, o.String())
		}
	}
}

// cliEnv is the environment of a CLI pointed at env's server.
func cliEnv(env *servertest.Env) Env {
	return func(k string) string {
		switch k {
		case "ASTRABOX_URL":
			return env.URL
		case "ASTRABOX_API_KEY":
			return servertest.Key
		case "MY_MODEL_KEY":
			return servertest.ModelKey
		}
		return ""
	}
}

// cliResult is what a command printed and its exit code.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs astrabox args in-process with stdin.
func runCLI(t *testing.T, env *servertest.Env, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut := newOutBuffer(), newOutBuffer()
	code := Main(ctx, args, IO{Stdin: strings.NewReader(stdin), Stdout: out, Stderr: errOut}, cliEnv(env))
	return cliResult{out.String(), errOut.String(), code}
}

// inOrder fails unless s holds each of want, in that order.
func inOrder(t *testing.T, s string, want ...string) {
	t.Helper()
	at := 0
	for _, w := range want {
		i := strings.Index(s[at:], w)
		if i < 0 {
			t.Fatalf("output lacks %q after offset %d:\n%s", w, at, s)
		}
		at += i + len(w)
	}
}

// TestCLIProfileAndAgent runs the profile and agent verbs in turn; the
// model key is never printed.
func TestCLIProfileAndAgent(t *testing.T) {
	env := servertest.New(t, servertest.Options{})
	model := []string{"--backend", env.Backend, "--engine-kinds", "astrabox", "--model-url", env.Model.URL(), "--models", "fake-1,fake-2"}
	steps := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"put, key from the environment", append([]string{"profile", "put", "test", "--model-key-env", "MY_MODEL_KEY", "--idle-timeout", "10m",
			"--network", "unrestricted", "--pool-size", "0"}, model...), 0, []string{"test (version 1)", "idle release 10m0s", "key set"}, nil},
		{"put, key as a flag", append([]string{"profile", "put", "test", "--model-key", servertest.ModelKey, "--idle-timeout", "600"}, model...),
			0, []string{"test (version 2)", "[fake-1,fake-2], key set"}, nil},
		{"put, no idle timeout", []string{"profile", "put", "quick", "--model-url", env.Model.URL()}, 0,
			[]string{"quick (version 1) idle release: the server's default for Sessions"}, nil},
		{"put, a model name without an endpoint", []string{"profile", "put", "bad", "--models", "m"}, 1, nil, []string{"need --model-url"}},
		{"put, an unset key variable", append([]string{"profile", "put", "bad", "--model-key-env", "UNSET"}, model...), 1, nil, []string{"$UNSET is empty"}},
		{"ls", []string{"profile", "ls"}, 0, []string{"NAME", "test", "fake-1,fake-2", "set"}, nil},
		{"show", []string{"profile", "show", "test"}, 0, []string{`"api_key_set": true`, `"idleTimeout": 600`}, nil},
		{"agent create", []string{"agent", "create", "--name", "coder", "--profile", "test", "--permission-mode", "ask",
			"--instructions", "Be brief.", "--tools", "shell,read_file"}, 0, []string{"agt_"}, nil},
		{"agent create, engine missing", []string{"agent", "create", "--name", "x", "--profile", "test", "--engine", "nope"}, 1, nil,
			[]string{"ENGINE_NOT_INSTALLED: "}},
		{"agent create, no profile", []string{"agent", "create", "--name", "x"}, 1, nil, []string{"--name and --profile are required"}},
		{"agent ls", []string{"agent", "ls"}, 0, []string{"coder", "astrabox", "fake-1", "ask", "shell,read_file"}, nil},
		{"agent show by name", []string{"agent", "show", "coder"}, 0, []string{`"name": "coder"`, `"instructions": "Be brief."`, `"model": "fake-1"`}, nil},
		{"agent show, flags after the name", []string{"agent", "show", "coder", "--json"}, 0, []string{`"agent_id": "agt_`}, nil},
		{"agent show, missing", []string{"agent", "show", "nobody"}, 1, nil, []string{"AGENT_NOT_FOUND: "}},
		{"agent rm", []string{"agent", "rm", "coder"}, 0, nil, nil},
		{"agent rm, gone", []string{"agent", "rm", "coder"}, 1, nil, []string{"AGENT_NOT_FOUND: "}},
		{"profile rm", []string{"profile", "rm", "test"}, 0, nil, nil},
		{"profile show, gone", []string{"profile", "show", "test"}, 1, nil, []string{"PROFILE_NOT_FOUND: "}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r := runCLI(t, env, "", st.args...)
			if r.code != st.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, st.code, r.stdout, r.stderr)
			}
			for _, w := range st.stdout {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			for _, w := range st.stderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if strings.Contains(r.stdout+r.stderr, servertest.ModelKey) {
				t.Fatalf("the model key was printed:\n%s\n%s", r.stdout, r.stderr)
			}
		})
	}
}

var sessionRE = regexp.MustCompile(`ses_[0-9a-z]+`)

// TestCLISession sends inputs with `session send` (the reply's text and
// tool calls printed), lists, shows, follows and removes the Session.
func TestCLISession(t *testing.T) {
	env := servertest.New(t, servertest.Options{Script: []fakemodel.Reply{
		fakemodel.Call("shell", map[string]any{"command": "echo from-the-box"}),
		fakemodel.Text("All done."),
		fakemodel.Text("The second answer."),
	}})
	env.Agent("auto", nil)

	r := runCLI(t, env, "", "session", "send", "--agent", "coder", "run", "it")
	if r.code != 0 {
		t.Fatalf("send: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	inOrder(t, r.stdout, `→ shell {"command":"echo from-the-box"}`, "← from-the-box", "(exit 0)", "All done.")
	sid := sessionRE.FindString(r.stderr)
	if sid == "" {
		t.Fatalf("send did not name the new session: %s", r.stderr)
	}
	r = runCLI(t, env, "second question\n", "session", "send", sid, "-")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "The second answer." {
		t.Fatalf("send from stdin: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if tr := env.Model.Requests()[2].Transcript(); !strings.Contains(tr, "second question") {
		t.Fatalf("the model did not get the input read from stdin:\n%s", tr)
	}

	checks := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"ls", []string{"session", "ls", "--agent", "coder"}, 0, []string{"SESSION", sid}},
		{"show", []string{"session", "show", sid}, 0, []string{`"session_id": "` + sid + `"`}},
		{"show messages", []string{"session", "show", sid, "--messages"}, 0, []string{"you: run it", "agent: [shell] All done.", "you: second question"}},
		{"send to a missing session", []string{"session", "send", "ses_missing", "hi"}, 1, []string{"SESSION_NOT_FOUND: "}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, env, "", c.args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", r.code, c.code, r.stdout, r.stderr)
			}
			inOrder(t, r.stdout+r.stderr, c.want...)
		})
	}

	// follow prints the raw log live until stopped.
	ctx, cancel := context.WithCancel(context.Background())
	out := newOutBuffer()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"session", "follow", sid, "--after", "0"}, IO{Stdin: strings.NewReader(""), Stdout: out, Stderr: io.Discard}, cliEnv(env))
	}()
	out.waitFor(t, `"type":"turn.ended"`, 2)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("follow: exit %d", code)
	}
	if !strings.HasPrefix(out.String(), `{"seq":1,"type":"input.accepted"`) {
		t.Fatalf("follow output starts %q", out.String()[:min(len(out.String()), 80)])
	}

	if r := runCLI(t, env, "", "session", "rm", sid); r.code != 0 {
		t.Fatalf("rm: %s", r.stderr)
	}
	if r := runCLI(t, env, "", "session", "show", sid); r.code != 1 || !strings.Contains(r.stderr, "SESSION_NOT_FOUND: ") {
		t.Fatalf("show after rm: %d %s", r.code, r.stderr)
	}
}

// TestCLIChat drives `chat` with scripted stdin: an input, its approval
// answered y, a second input, then the end of stdin; then continues the
// Session, which shows its history.
func TestCLIChat(t *testing.T) {
	env := servertest.New(t, servertest.Options{Script: []fakemodel.Reply{
		fakemodel.Call("shell", map[string]any{"command": "echo approved-ran"}),
		fakemodel.Text("ran it"),
		fakemodel.Text("second answer"),
	}})
	env.Agent("ask", nil)

	r := runCLI(t, env, "run it\ny\nand again\n", "chat", "coder")
	if r.code != 0 {
		t.Fatalf("chat: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	inOrder(t, r.stdout+"\n--- stderr:\n"+r.stderr, `→ shell {"command":"echo approved-ran"}`, "approve? [y/N]", "← approved-ran", "ran it", "second answer")
	inOrder(t, r.stderr, "chat with coder in session ses_", "continue with: astrabox chat --session ses_")
	if n := len(env.Model.Requests()); n != 3 {
		t.Fatalf("the model was called %d times, want 3", n)
	}
	sid := sessionRE.FindString(r.stderr)

	r = runCLI(t, env, "", "chat", "--session", sid)
	if r.code != 0 {
		t.Fatalf("chat --session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	inOrder(t, r.stdout, "you: run it", "agent: [shell] ran it", "you: and again", "agent: second answer")
}

// TestCLIChatInterrupt: the first Ctrl-C during a reply interrupts it and
// the chat goes on.
func TestCLIChatInterrupt(t *testing.T) {
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	env := servertest.New(t, servertest.Options{Script: []fakemodel.Reply{
		fakemodel.Text("Zzz, this never completes").HoldUntil(gate),
		fakemodel.Text("after the interrupt"),
	}})
	env.Agent("auto", nil)

	// cmd/astrabox's context ends with this cause at the first Ctrl-C.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stdin, feed := io.Pipe()
	out, errOut := newOutBuffer(), newOutBuffer()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"chat", "coder"}, IO{Stdin: stdin, Stdout: out, Stderr: errOut}, cliEnv(env))
	}()
	if _, err := io.WriteString(feed, "start\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "Z", 1)
	cancel(errors.New(interruptCause))
	out.waitFor(t, "[interrupted]", 1)
	if _, err := io.WriteString(feed, "next\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "after the interrupt", 1)
	feed.Close()
	if code := <-done; code != 0 {
		t.Fatalf("chat: exit %d\n%s", code, errOut.String())
	}
	inOrder(t, errOut.String(), "[interrupting the reply; Ctrl-C again quits]")
}
