package sandboxtest

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

func testCode(t *testing.T, h Harness) {
	b := NewBox(t, h, nil)
	ctx := ctxFor(t, 3*time.Minute)
	py, err := b.Client.CreateContext(ctx, wire.CodeContext{Language: "python"})
	if err != nil {
		t.Fatalf("create python context: %v", err)
	}
	if py.ID == "" || py.Language != "python" {
		t.Fatalf("created %+v", py)
	}
	cell := func(t *testing.T, code string) *client.CodeExecution {
		t.Helper()
		ex, err := b.Client.RunCode(ctx, wire.RunCodeRequest{Context: py, Code: code})
		if err != nil {
			t.Fatalf("run %q: %v", code, err)
		}
		if !ex.Complete || ex.ContextID != py.ID {
			t.Fatalf("run %q: complete %v, context %q", code, ex.Complete, ex.ContextID)
		}
		return ex
	}

	t.Run("PythonKeepsState", func(t *testing.T) {
		first := cell(t, "x = 41")
		if first.Error != nil || len(first.Results) != 0 {
			t.Fatalf("assignment: %+v", first)
		}
		ex := cell(t, "x + 1")
		if ex.Text() != "42" || ex.Error != nil {
			t.Fatalf("x + 1: result %q, error %+v", ex.Text(), ex.Error)
		}
		if ex.ExecutionCount <= first.ExecutionCount {
			t.Fatalf("execution count %d after %d", ex.ExecutionCount, first.ExecutionCount)
		}
	})

	t.Run("PythonOutput", func(t *testing.T) {
		ex := cell(t, "import sys, os\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nrc = os.system('echo from-subprocess; echo sub-err >&2')")
		if string(ex.Stdout) != "to stdout\nfrom-subprocess\n" || string(ex.Stderr) != "to stderr\nsub-err\n" {
			t.Fatalf("stdout %q stderr %q", ex.Stdout, ex.Stderr)
		}
	})

	t.Run("PythonStreamsAsProduced", func(t *testing.T) {
		flag := "code-flag-" + NewID()
		code := "import os, time\nprint('first', flush=True)\nwhile not os.path.exists('" + flag + "'):\n    time.sleep(0.01)\nprint('second')"
		var types []string
		var stdout strings.Builder
		touched := false
		err := b.Client.RunCodeStream(ctx, wire.RunCodeRequest{Context: py, Code: code}, func(ev client.Event) error {
			types = append(types, ev.Type)
			if ev.Type != wire.EventStdout {
				return nil
			}
			stdout.WriteString(ev.Text)
			if !touched && stdout.String() == "first\n" {
				// The cell waits for this: its first line must have
				// arrived while it was still running.
				touched = true
				ex, err := b.Client.Run(ctx, wire.RunCommandRequest{Command: "touch " + flag})
				if err != nil || ex.ExitCode != 0 {
					t.Errorf("touch flag: %+v %v", ex, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := stdout.String(); got != "first\nsecond\n" {
			t.Fatalf("stdout %q", got)
		}
		if types[0] != wire.EventInit || types[len(types)-1] != wire.EventComplete {
			t.Fatalf("event order %v", types)
		}
	})

	t.Run("PythonTraceback", func(t *testing.T) {
		ex := cell(t, "def f():\n    return 1/0\nf()")
		if ex.Error == nil || ex.Error.Name != "ZeroDivisionError" || ex.Error.Value == "" {
			t.Fatalf("error %+v", ex.Error)
		}
		tb := strings.Join(ex.Error.Traceback, "\n")
		if !strings.Contains(tb, "Traceback") || !strings.Contains(tb, "1/0") {
			t.Fatalf("traceback %q", tb)
		}
	})

	t.Run("PythonInterrupt", func(t *testing.T) {
		type outcome struct {
			ex  *client.CodeExecution
			err error
		}
		started := make(chan struct{})
		done := make(chan outcome, 1)
		go func() {
			ex := &client.CodeExecution{}
			var once bool
			err := b.Client.RunCodeStream(ctx, wire.RunCodeRequest{Context: py, Code: "print('spinning', flush=True)\nwhile True:\n    pass"}, func(ev client.Event) error {
				if ev.Type == wire.EventStdout && !once {
					once = true
					close(started)
				}
				if ev.Type == wire.EventError {
					ex.Error = ev.Error
				}
				return nil
			})
			done <- outcome{ex, err}
		}()
		select {
		case <-started:
		case o := <-done:
			t.Fatalf("the loop ended before printing: %+v %v", o.ex, o.err)
		}
		if err := b.Client.InterruptCode(ctx, py.ID); err != nil {
			t.Fatalf("interrupt: %v", err)
		}
		o := <-done
		if o.err != nil || o.ex.Error == nil || o.ex.Error.Name != "KeyboardInterrupt" {
			t.Fatalf("interrupted run: error %+v, %v", o.ex.Error, o.err)
		}
		if ex := cell(t, "x"); ex.Text() != "41" {
			t.Fatalf("after the interrupt: result %q, error %+v", ex.Text(), ex.Error)
		}
	})

	t.Run("Stateless", func(t *testing.T) {
		ex, err := b.Client.RunCode(ctx, wire.RunCodeRequest{Code: "print('no context')\n6 * 7"})
		if err != nil || string(ex.Stdout) != "no context\n" || ex.Text() != "42" {
			t.Fatalf("stateless run: %+v %v", ex, err)
		}
		_, err = b.Client.GetContext(ctx, ex.ContextID)
		wantErrCode(t, "temporary context after the run", err, sandbox.CodeContextNotFound)
	})

	t.Run("BashContext", func(t *testing.T) {
		bash, err := b.Client.CreateContext(ctx, wire.CodeContext{Language: "bash"})
		if err != nil || bash.Language != "bash" {
			t.Fatalf("create bash context: %+v %v", bash, err)
		}
		if ex, err := b.Client.RunCode(ctx, wire.RunCodeRequest{Context: bash, Code: "CODE_VAR=kept; cd /"}); err != nil || ex.Error != nil {
			t.Fatalf("first run: %+v %v", ex, err)
		}
		ex, err := b.Client.RunCode(ctx, wire.RunCodeRequest{Context: bash, Code: `echo "$CODE_VAR $PWD"`})
		if err != nil || string(ex.Stdout) != "kept /\n" {
			t.Fatalf("second run: %+v %v", ex, err)
		}
		ex, err = b.Client.RunCode(ctx, wire.RunCodeRequest{Context: bash, Code: "false"})
		if err != nil || ex.Error == nil || ex.ExitCode != 1 {
			t.Fatalf("failing run: %+v %v", ex, err)
		}
	})

	t.Run("ListAndDelete", func(t *testing.T) {
		other, err := b.Client.CreateContext(ctx, wire.CodeContext{Language: "python"})
		if err != nil {
			t.Fatal(err)
		}
		has := func(list []wire.CodeContext, id string) bool {
			for _, cc := range list {
				if cc.ID == id {
					return true
				}
			}
			return false
		}
		list, err := b.Client.ListContexts(ctx, "python")
		if err != nil || !has(list, py.ID) || !has(list, other.ID) {
			t.Fatalf("list python: %+v %v", list, err)
		}
		for _, cc := range list {
			if cc.Language != "python" {
				t.Fatalf("list python returned %+v", cc)
			}
		}
		if got, err := b.Client.GetContext(ctx, other.ID); err != nil || got.ID != other.ID || got.Language != "python" {
			t.Fatalf("get: %+v %v", got, err)
		}
		if err := b.Client.DeleteContext(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		_, err = b.Client.GetContext(ctx, other.ID)
		wantErrCode(t, "get deleted", err, sandbox.CodeContextNotFound)
		if err := b.Client.DeleteContexts(ctx, "python"); err != nil {
			t.Fatal(err)
		}
		if list, err := b.Client.ListContexts(ctx, "python"); err != nil || len(list) != 0 {
			t.Fatalf("after deleting all python contexts: %+v %v", list, err)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		_, err := b.Client.GetContext(ctx, "ctx-unknown")
		wantErrCode(t, "get unknown", err, sandbox.CodeContextNotFound)
		wantErrCode(t, "delete unknown", b.Client.DeleteContext(ctx, "ctx-unknown"), sandbox.CodeContextNotFound)
		_, err = b.Client.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: "ctx-unknown", Language: "python"}, Code: "1"})
		wantErrCode(t, "run in unknown", err, sandbox.CodeContextNotFound)
		_, err = b.Client.CreateContext(ctx, wire.CodeContext{Language: "cobol"})
		wantErrCode(t, "unknown language", err, sandbox.CodeInvalidRequest)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Fatalf("unknown language: want HTTP 400, got %v", err)
		}
	})
}
