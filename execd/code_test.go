package execd

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/sandbox"
)

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
}

func newPythonContext(t *testing.T, c *client.Client) string {
	t.Helper()
	cc, err := c.CreateContext(sessionCtx(t), wire.CodeContext{Language: "python"})
	if err != nil {
		t.Fatal(err)
	}
	if cc.ID == "" || cc.Language != "python" {
		t.Fatalf("created %+v", cc)
	}
	return cc.ID
}

func TestCodePythonCells(t *testing.T) {
	needPython(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id := newPythonContext(t, c)
	cells := []struct {
		name           string
		code           string
		stdout, stderr string
		result         string // "" = no result
		ename          string
		tb             string // in the traceback
	}{
		{"assign", "x = 41", "", "", "", "", ""},
		{"state and result", "x + 1", "", "", "42", "", ""},
		{"print then result", "print('hi')\n'a' * 2", "hi\n", "", "'aa'", "", ""},
		{"None is no result", "None", "", "", "", "", ""},
		{"stderr", "import sys\nprint('oops', file=sys.stderr)", "", "oops\n", "", "", ""},
		{"subprocess", "import os\nos.system('echo from-child; echo child-err >&2')", "from-child\n", "child-err\n", "0", "", ""},
		{"subprocess result", "import subprocess\nsubprocess.run(['echo', 'sub']).returncode", "sub\n", "", "0", "", ""},
		{"exception", "def f():\n    return 1/0\nprint('before')\nf()", "before\n", "", "", "ZeroDivisionError", `File "<cell-`},
		{"syntax error", "def (", "", "", "", "SyntaxError", ""},
		{"output kept after error", "print('after')", "after\n", "", "", "", ""},
		{"underscore is last result", "_", "", "", "0", "", ""},
		{"no newline", "import sys; sys.stdout.write('abc')", "abc", "", "3", "", ""},
		{"unicode", "print('héllo ☃')", "héllo ☃\n", "", "", "", ""},
		{"input is empty", "input()", "", "", "", "EOFError", ""},
		{"sys.exit is an error", "import sys; sys.exit(3)", "", "", "", "SystemExit", ""},
		{"main module", "import __main__; __main__.x", "", "", "41", "", ""},
		{"marker-like output", "print('__astrabox-', end='')", "__astrabox-", "", "", "", ""},
	}
	prevCount := 0
	for _, cell := range cells {
		ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id, Language: "python"}, Code: cell.code})
		if err != nil {
			t.Fatalf("%s: %v", cell.name, err)
		}
		if ex.ContextID != id || !ex.Complete || ex.ExecutionCount != prevCount+1 {
			t.Fatalf("%s: context %s complete %v count %d (previous %d)", cell.name, ex.ContextID, ex.Complete, ex.ExecutionCount, prevCount)
		}
		prevCount = ex.ExecutionCount
		if string(ex.Stdout) != cell.stdout || string(ex.Stderr) != cell.stderr || ex.Text() != cell.result {
			t.Fatalf("%s: stdout %q stderr %q result %q; want %q %q %q", cell.name, ex.Stdout, ex.Stderr, ex.Text(), cell.stdout, cell.stderr, cell.result)
		}
		if cell.result != "" && ex.Results[0]["text"] != cell.result {
			t.Fatalf("%s: results %v lack the text alias", cell.name, ex.Results)
		}
		switch {
		case cell.ename == "" && ex.Error != nil:
			t.Fatalf("%s: unexpected error %+v", cell.name, ex.Error)
		case cell.ename != "" && (ex.Error == nil || ex.Error.Name != cell.ename):
			t.Fatalf("%s: error %+v, want %s", cell.name, ex.Error, cell.ename)
		case cell.ename != "" && !strings.Contains(strings.Join(ex.Error.Traceback, "\n"), cell.tb):
			t.Fatalf("%s: traceback %q lacks %q", cell.name, ex.Error.Traceback, cell.tb)
		case ex.Error != nil && strings.Contains(strings.Join(ex.Error.Traceback, "\n"), "astrabox-driver"):
			t.Fatalf("%s: traceback shows driver frames: %q", cell.name, ex.Error.Traceback)
		}
	}
}

func TestCodePythonInterrupt(t *testing.T) {
	needPython(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id := newPythonContext(t, c)
	if _, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: "kept = 'yes'"}); err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"print('spin', flush=True)\nwhile True: pass", "import time\nprint('spin')\ntime.sleep(60)", "import os\nprint('spin')\nos.system('sleep 60')\nwhile True: pass"} {
		started := make(chan struct{})
		var once sync.Once
		done := make(chan *client.CodeExecution, 1)
		go func() {
			ex := &client.CodeExecution{}
			err := c.RunCodeStream(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: code}, func(ev client.Event) error {
				if ev.Type == wire.EventStdout {
					once.Do(func() { close(started) })
				}
				if ev.Type == wire.EventError {
					ex.Error = ev.Error
				}
				return nil
			})
			if err != nil {
				ex.Error = &wire.ExecError{Name: "stream", Value: err.Error()}
			}
			done <- ex
		}()
		select {
		case <-started:
		case ex := <-done:
			t.Fatalf("%q ended before printing: %+v", code, ex.Error)
		}
		if _, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: "1"}); client.CodeOf(err) != sandbox.CodeConflict {
			t.Fatalf("concurrent run: want CONFLICT, got %v", err)
		}
		if err := c.InterruptCode(ctx, id); err != nil {
			t.Fatal(err)
		}
		ex := <-done
		if ex.Error == nil || ex.Error.Name != "KeyboardInterrupt" {
			t.Fatalf("%q: interrupted run reported %+v", code, ex.Error)
		}
	}
	ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: "kept"})
	if err != nil || ex.Text() != "'yes'" {
		t.Fatalf("after interrupt: %+v %v", ex, err)
	}
	if err := c.InterruptCode(ctx, id); err != nil {
		t.Fatalf("interrupt while idle: %v", err)
	}
}

func TestCodePythonDisconnectInterrupts(t *testing.T) {
	needPython(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id := newPythonContext(t, c)
	runCtx, cancel := context.WithCancel(ctx)
	_ = c.RunCodeStream(runCtx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: "print('go', flush=True)\nwhile True: pass"}, func(ev client.Event) error {
		if ev.Type == wire.EventStdout {
			cancel()
		}
		return nil
	})
	cancel()
	var ex *client.CodeExecution
	var err error
	wait.Until(t, 30*time.Second, "the context to be free", func() bool {
		ex, err = c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: "2 + 2"})
		return client.CodeOf(err) != sandbox.CodeConflict
	})
	if err != nil || ex.Text() != "4" {
		t.Fatalf("after disconnect: %+v %v", ex, err)
	}
}

func TestCodePythonInterpreterExit(t *testing.T) {
	needPython(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id := newPythonContext(t, c)
	ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: "import os\nprint('bye', flush=True)\nos._exit(5)"})
	if err != nil || ex.Error == nil || ex.Error.Name != "InterpreterExited" || string(ex.Stdout) != "bye\n" {
		t.Fatalf("exit: %+v %v", ex, err)
	}
	if _, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: "1"}); client.CodeOf(err) != sandbox.CodeConflict {
		t.Fatalf("run after exit: %v", err)
	}
	if err := c.DeleteContext(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func TestCodeStatelessAndBash(t *testing.T) {
	needPython(t)
	needBash(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	ex, err := c.RunCode(ctx, wire.RunCodeRequest{Code: "y = 6\ny * 7"})
	if err != nil || ex.Text() != "42" || ex.ContextID == "" {
		t.Fatalf("stateless python: %+v %v", ex, err)
	}
	if _, err := c.GetContext(ctx, ex.ContextID); client.CodeOf(err) != sandbox.CodeContextNotFound {
		t.Fatalf("temporary context survived: %v", err)
	}
	ex, err = c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{Language: "bash"}, Code: "echo stateless"})
	if err != nil || string(ex.Stdout) != "stateless\n" || ex.ExitCode != 0 {
		t.Fatalf("stateless bash: %+v %v", ex, err)
	}

	cc, err := c.CreateContext(ctx, wire.CodeContext{Language: "bash"})
	if err != nil || cc.Language != "bash" {
		t.Fatalf("create bash: %+v %v", cc, err)
	}
	steps := []struct {
		code, stdout string
		exit, count  int
	}{
		{"export V=1; W=2", "", 0, 1},
		{"echo $V$W", "12\n", 0, 2},
		{"false", "", 1, 3},
	}
	for _, st := range steps {
		ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: st.code})
		if err != nil || string(ex.Stdout) != st.stdout || ex.ExitCode != st.exit || ex.ExecutionCount != st.count || (st.exit != 0) != (ex.Error != nil) {
			t.Fatalf("%q: %+v %v", st.code, ex, err)
		}
	}
	done := make(chan *client.CodeExecution, 1)
	started := make(chan struct{})
	go func() {
		ex := &client.CodeExecution{ExitCode: -1}
		var once sync.Once
		err := c.RunCodeStream(ctx, wire.RunCodeRequest{Context: cc, Code: "echo go; sleep 60; sleep 60"}, func(ev client.Event) error {
			if ev.Type == wire.EventStdout {
				once.Do(func() { close(started) })
			}
			if ev.Type == wire.EventComplete && ev.ExitCode != nil {
				ex.ExitCode = *ev.ExitCode
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		done <- ex
	}()
	select {
	case <-started:
	case ex := <-done:
		t.Fatalf("bash run ended before printing: %+v", ex)
	}
	start := time.Now()
	if err := c.InterruptCode(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
	if ex := <-done; ex.ExitCode == 0 || time.Since(start) > 10*time.Second {
		t.Fatalf("interrupted bash run: exit %d after %s", ex.ExitCode, time.Since(start))
	}
	ex, err = c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: "echo $V"})
	if err != nil || string(ex.Stdout) != "1\n" {
		t.Fatalf("bash context after interrupt: %+v %v", ex, err)
	}
}

func TestCodeContextManagement(t *testing.T) {
	needPython(t)
	needBash(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	py := newPythonContext(t, c)
	bash, err := c.CreateContext(ctx, wire.CodeContext{Language: "BASH"})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(lang string) string {
		list, err := c.ListContexts(ctx, lang)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cc := range list {
			out = append(out, cc.Language+":"+cc.ID)
		}
		return strings.Join(out, ",")
	}
	if got, want := ids(""), "python:"+py+",bash:"+bash.ID; got != want {
		t.Fatalf("list all = %s, want %s", got, want)
	}
	if got := ids("bash"); got != "bash:"+bash.ID {
		t.Fatalf("list bash = %s", got)
	}
	if got, err := c.GetContext(ctx, py); err != nil || got.ID != py || got.Language != "python" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := c.DeleteContexts(ctx, "python"); err != nil {
		t.Fatal(err)
	}
	if got := ids(""); got != "bash:"+bash.ID {
		t.Fatalf("after deleting python contexts: %s", got)
	}
	if err := c.DeleteContext(ctx, bash.ID); err != nil {
		t.Fatal(err)
	}
	if got := ids(""); got != "" {
		t.Fatalf("after deleting all: %s", got)
	}

	tests := []struct {
		name string
		call func() error
		code sandbox.Code
	}{
		{"get unknown", func() error { _, err := c.GetContext(ctx, "ctx-nope"); return err }, sandbox.CodeContextNotFound},
		{"delete unknown", func() error { return c.DeleteContext(ctx, "ctx-nope") }, sandbox.CodeContextNotFound},
		{"run in unknown", func() error {
			_, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: "ctx-nope"}, Code: "1"})
			return err
		}, sandbox.CodeContextNotFound},
		{"interrupt unknown", func() error { return c.InterruptCode(ctx, "ctx-nope") }, sandbox.CodeContextNotFound},
		{"interrupt without id", func() error { return c.InterruptCode(ctx, "") }, sandbox.CodeMissingQuery},
		{"unknown language", func() error {
			_, err := c.CreateContext(ctx, wire.CodeContext{Language: "cobol"})
			return err
		}, sandbox.CodeInvalidRequest},
		{"run unknown language", func() error {
			_, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{Language: "cobol"}, Code: "1"})
			return err
		}, sandbox.CodeInvalidRequest},
		{"list unknown language", func() error { _, err := c.ListContexts(ctx, "cobol"); return err }, sandbox.CodeInvalidRequest},
		{"delete all without language", func() error { return c.DeleteContexts(ctx, "") }, sandbox.CodeMissingQuery},
		{"empty code", func() error { _, err := c.RunCode(ctx, wire.RunCodeRequest{Code: " "}); return err }, sandbox.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := client.CodeOf(tt.call()); got != tt.code {
				t.Fatalf("code %q, want %q", got, tt.code)
			}
		})
	}
}

func TestCodePythonMissing(t *testing.T) {
	_, c := startSessionServer(t, Config{Python: "python-that-does-not-exist"})
	_, err := c.CreateContext(sessionCtx(t), wire.CodeContext{Language: "python"})
	if client.CodeOf(err) != sandbox.CodeNotSupported || !strings.Contains(err.Error(), "python-that-does-not-exist") {
		t.Fatalf("want NOT_SUPPORTED naming the interpreter, got %v", err)
	}
}

func TestCodePythonDriverFailsToStart(t *testing.T) {
	needBash(t)
	// An "interpreter" that is not python: the driver never gets ready.
	_, c := startSessionServer(t, Config{Python: "false"})
	_, err := c.CreateContext(sessionCtx(t), wire.CodeContext{})
	if client.CodeOf(err) != sandbox.CodeRuntime {
		t.Fatalf("want RUNTIME_ERROR, got %v", err)
	}
}

func TestCodeCloseKillsContexts(t *testing.T) {
	needPython(t)
	srv, c := startSessionServer(t, Config{})
	id := newPythonContext(t, c)
	cc, err := srv.contexts.get(id)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if !closed(cc.py.exited) {
		t.Fatal("interpreter still running after Close")
	}
	if _, err := c.CreateContext(sessionCtx(t), wire.CodeContext{}); client.CodeOf(err) != sandbox.CodeUnavailable {
		t.Fatalf("create after Close: %v", err)
	}
}

func TestCodeAndSessionLargeOutput(t *testing.T) {
	needPython(t)
	needBash(t)
	_, c := startSessionServer(t, Config{OutputLimit: 256 << 10})
	ctx := sessionCtx(t)
	const n = 3 << 20
	ex, err := c.RunCode(ctx, wire.RunCodeRequest{Code: "import sys\nsys.stdout.write('x' * " + strconv.Itoa(n) + ")\nsys.stderr.write('y' * 1000)"})
	if err != nil || len(ex.Stdout) != n || len(ex.Stderr) != 1000 || ex.Error != nil {
		t.Fatalf("python: %d bytes of stdout, %d of stderr, error %+v, %v", len(ex.Stdout), len(ex.Stderr), ex.Error, err)
	}
	id, err := c.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sx, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "head -c " + strconv.Itoa(n) + " /dev/zero | tr '\\0' x; echo done >&2"})
	if err != nil || len(sx.Stdout) != n || string(sx.Stderr) != "done\n" || sx.ExitCode != 0 {
		t.Fatalf("session: %d bytes of stdout, stderr %q, exit %d, %v", len(sx.Stdout), sx.Stderr, sx.ExitCode, err)
	}
}

func TestCodePythonRedirectedStdout(t *testing.T) {
	needPython(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id := newPythonContext(t, c)
	start := time.Now()
	// The cell points fd 1 elsewhere: the driver must not mark it, or the
	// run would wait for a marker that never comes.
	ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: "import os, sys\nprint('err', file=sys.stderr)\nos.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n7"})
	if err != nil || ex.Text() != "7" || string(ex.Stderr) != "err\n" || !ex.Complete {
		t.Fatalf("redirected: %+v %v", ex, err)
	}
	ex, err = c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: "8"})
	if err != nil || ex.Text() != "8" {
		t.Fatalf("next cell: %+v %v", ex, err)
	}
	if took := time.Since(start); took > markerIdle {
		t.Fatalf("the next cell took %s: it waited for a marker", took)
	}
}
