package execd

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

func needNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
}

// nodeStrips reports whether the node on PATH strips TypeScript types.
func nodeStrips(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command("node", "-p", "typeof require('node:module').stripTypeScriptTypes").Output()
	return err == nil && strings.TrimSpace(string(out)) == "function"
}

// TestCodeJavaScriptCells: a javascript context keeps state between cells
// like a python one, reports the completion value as the result, a thrown
// error with its stack, and output in order.
func TestCodeJavaScriptCells(t *testing.T) {
	needNode(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	cc, err := c.CreateContext(ctx, wire.CodeContext{Language: "javascript"})
	if err != nil || cc.Language != "javascript" {
		t.Fatalf("create: %+v %v", cc, err)
	}
	for _, cell := range []struct {
		name, code     string
		stdout, stderr string
		result         string // "" = no result
		ename, tb      string
	}{
		{name: "declare", code: "let x = 41; var y = 1; function f(a) { return a * 2 }"},
		{name: "state and result", code: "x + y", result: "42"},
		{name: "print then result", code: "console.log('hi'); 'a'.repeat(2)", stdout: "hi\n", result: "'aa'"},
		{name: "stderr", code: "console.error('oops')", stderr: "oops\n"},
		{name: "require", code: "require('node:path').join('a', 'b')", result: "'a/b'"},
		{name: "promise awaited", code: "(async () => { await new Promise(r => setTimeout(r, 20)); return f(x) })()", result: "82"},
		{name: "throw", code: "console.log('before'); null.boom", stdout: "before\n", ename: "TypeError", tb: "<cell-"},
		{name: "syntax error", code: "let (", ename: "SyntaxError"},
		{name: "state after errors", code: "x", result: "41"},
		{name: "object result", code: "({a: 1, b: [2]})", result: "{ a: 1, b: [ 2 ] }"},
	} {
		ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: cell.code})
		if err != nil {
			t.Fatalf("%s: %v", cell.name, err)
		}
		if string(ex.Stdout) != cell.stdout || string(ex.Stderr) != cell.stderr || ex.Text() != cell.result || !ex.Complete {
			t.Fatalf("%s: stdout %q stderr %q result %q complete %v, want %q %q %q", cell.name, ex.Stdout, ex.Stderr, ex.Text(), ex.Complete, cell.stdout, cell.stderr, cell.result)
		}
		switch {
		case cell.ename == "" && ex.Error != nil:
			t.Fatalf("%s: unexpected error %+v", cell.name, ex.Error)
		case cell.ename != "" && (ex.Error == nil || ex.Error.Name != cell.ename || !strings.Contains(strings.Join(ex.Error.Traceback, "\n"), cell.tb)):
			t.Fatalf("%s: error %+v, want %s with %q in the traceback", cell.name, ex.Error, cell.ename, cell.tb)
		case ex.Error != nil && strings.Contains(strings.Join(ex.Error.Traceback, "\n"), "astrabox-driver"):
			t.Fatalf("%s: the driver shows in the traceback: %q", cell.name, ex.Error.Traceback)
		}
	}
	// Stateless: a fresh context for one cell, gone afterwards.
	ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{Language: "js"}, Code: "6 * 7"})
	if err != nil || ex.Text() != "42" {
		t.Fatalf("stateless: %+v %v", ex, err)
	}
	if _, err := c.GetContext(ctx, ex.ContextID); client.CodeOf(err) != sandbox.CodeContextNotFound {
		t.Fatalf("temporary context survived: %v", err)
	}
	if list, err := c.ListContexts(ctx, "javascript"); err != nil || len(list) != 1 || list[0].ID != cc.ID {
		t.Fatalf("list javascript: %+v %v", list, err)
	}
}

// TestCodeJavaScriptInterrupt: DELETE /code ends a busy cell; the context
// keeps its state.
func TestCodeJavaScriptInterrupt(t *testing.T) {
	needNode(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	cc, err := c.CreateContext(ctx, wire.CodeContext{Language: "javascript"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: "var kept = 'yes'"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan *wire.ExecError, 1)
	spinning := make(chan struct{})
	go func() {
		var ee *wire.ExecError
		err := c.RunCodeStream(ctx, wire.RunCodeRequest{Context: cc, Code: "console.log('spinning'); for (;;) {}"}, func(ev client.Event) error {
			switch ev.Type {
			case wire.EventStdout:
				close(spinning)
			case wire.EventError:
				ee = ev.Error
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		done <- ee
	}()
	<-spinning
	start := time.Now()
	if err := c.InterruptCode(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
	if ee := <-done; ee == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("interrupted cell: error %+v after %s", ee, time.Since(start))
	}
	if ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: "kept"}); err != nil || ex.Text() != "'yes'" {
		t.Fatalf("after the interrupt: %+v %v", ex, err)
	}
}

// TestCodeTypeScript: typescript cells run with their types stripped where
// node can strip them; elsewhere the context is refused, saying why.
func TestCodeTypeScript(t *testing.T) {
	needNode(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	cc, err := c.CreateContext(ctx, wire.CodeContext{Language: "typescript"})
	if !nodeStrips(t) {
		if client.CodeOf(err) != sandbox.CodeNotSupported || !strings.Contains(err.Error(), "node 22.13") || !strings.Contains(err.Error(), "javascript") {
			t.Fatalf("want NOT_SUPPORTED naming the node needed and the languages offered, got %v", err)
		}
		t.Logf("refused as expected: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, cell := range []struct{ code, result string }{
		{"interface P { n: number }\nconst p: P = { n: 2 }\nlet k: number = 40", ""},
		{"p.n + k as number", "42"},
	} {
		ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: cell.code})
		if err != nil || ex.Error != nil || ex.Text() != cell.result || len(ex.Stderr) != 0 {
			t.Fatalf("%q: %+v %v", cell.code, ex, err)
		}
	}
}

// TestCodeNodeMissing: without node, javascript is refused, naming the
// languages the box offers.
func TestCodeNodeMissing(t *testing.T) {
	_, c := startSessionServer(t, Config{Node: "node-that-does-not-exist"})
	for _, lang := range []string{"javascript", "typescript"} {
		_, err := c.CreateContext(sessionCtx(t), wire.CodeContext{Language: lang})
		if client.CodeOf(err) != sandbox.CodeNotSupported || !strings.Contains(err.Error(), "node-that-does-not-exist") ||
			!strings.Contains(err.Error(), "this box offers: ") || !strings.Contains(err.Error(), "bash") || strings.Contains(err.Error(), "offers: javascript") {
			t.Fatalf("%s: want NOT_SUPPORTED naming the interpreter and the languages offered, got %v", lang, err)
		}
	}
	_, err := c.CreateContext(sessionCtx(t), wire.CodeContext{Language: "cobol"})
	if client.CodeOf(err) != sandbox.CodeInvalidRequest || !strings.Contains(err.Error(), "python, bash, javascript, typescript, java, go") {
		t.Fatalf("cobol: %v", err)
	}
}
