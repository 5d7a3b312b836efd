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

// needJDK skips without a JDK (java with jshell beside it) on PATH.
func needJDK(t *testing.T) {
	t.Helper()
	if _, err := jdkLauncher(&Config{Java: "java"}); err != nil {
		t.Skipf("no JDK: %v", err)
	}
}

// goTestConfig is a Config whose go contexts use the go on PATH (or the
// standard install) and the test machine's build cache, so that cells do
// not compile the standard library anew; it skips without go.
func goTestConfig(t *testing.T) Config {
	t.Helper()
	bin, err := goCommand(&Config{Go: "go"})
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.Command(bin, "env", "GOCACHE").Output()
	if err != nil {
		t.Skipf("go env GOCACHE: %v", err)
	}
	return Config{Go: bin, Env: []string{"GOCACHE=" + strings.TrimSpace(string(out))}}
}

type langCell struct {
	name, code string
	stdout     string // "" = none
	result     string // "" = no result
	ename, tb  string // the error's name and text in its traceback; "" = no error
}

// runCells runs cells in context cc in order, checking each.
func runCells(t *testing.T, c *client.Client, cc wire.CodeContext, cells []langCell) {
	t.Helper()
	ctx := sessionCtx(t)
	for _, cell := range cells {
		ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: cell.code})
		if err != nil {
			t.Fatalf("%s: %v", cell.name, err)
		}
		if string(ex.Stdout) != cell.stdout || ex.Text() != cell.result {
			t.Fatalf("%s: stdout %q result %q (stderr %q, error %+v), want %q %q", cell.name, ex.Stdout, ex.Text(), ex.Stderr, ex.Error, cell.stdout, cell.result)
		}
		tb := ""
		if ex.Error != nil {
			tb = strings.Join(ex.Error.Traceback, "\n") + "\n" + string(ex.Stderr)
		}
		switch {
		case cell.ename == "" && ex.Error != nil:
			t.Fatalf("%s: unexpected error %+v (stderr %q)", cell.name, ex.Error, ex.Stderr)
		case cell.ename != "" && (ex.Error == nil || ex.Error.Name != cell.ename || !strings.Contains(tb, cell.tb)):
			t.Fatalf("%s: error %+v (stderr %q), want %s with %q", cell.name, ex.Error, ex.Stderr, cell.ename, cell.tb)
		}
	}
}

// TestCodeJavaCells: a java context keeps variables, methods and classes
// between cells, reports a last expression's value as the result, a
// compile error and a thrown exception as errors, and keeps its state
// after them.
func TestCodeJavaCells(t *testing.T) {
	needJDK(t)
	_, c := startSessionServer(t, Config{})
	cc, err := c.CreateContext(sessionCtx(t), wire.CodeContext{Language: "java"})
	if err != nil || cc.Language != "java" {
		t.Fatalf("create: %+v %v", cc, err)
	}
	runCells(t, c, cc, []langCell{
		{name: "print, declare, result", code: "System.out.println(\"Hello from Java!\");\nint result = 2 + 2;\nSystem.out.println(\"2 + 2 = \" + result);\nresult",
			stdout: "Hello from Java!\n2 + 2 = 4\n", result: "4"},
		{name: "method and class", code: "int twice(int x) { return 2 * x; }\nclass P { String hi() { return \"hé\"; } }"},
		{name: "state kept", code: "twice(result) + 1", result: "9"},
		{name: "string result", code: "new P().hi()", result: `"hé"`},
		{name: "print without newline", code: "System.out.print(\"no newline\")", stdout: "no newline"},
		{name: "thrown", code: "System.out.println(\"before\");\nint x = 10 / 0;", stdout: "before\n", ename: "EvalException", tb: "java.lang.ArithmeticException: / by zero"},
		{name: "compile error", code: "undefinedMethod(1)", ename: "CompilationException", tb: "cannot find symbol"},
		{name: "state after errors", code: "result", result: "4"},
		{name: "import persists", code: "import java.util.concurrent.atomic.*;\nvar n = new AtomicInteger(41);"},
		{name: "imported type", code: "n.incrementAndGet()", result: "42"},
	})
}

// TestCodeJavaInterrupt: DELETE /code stops a busy java cell; the context
// keeps its state.
func TestCodeJavaInterrupt(t *testing.T) {
	needJDK(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	cc, err := c.CreateContext(ctx, wire.CodeContext{Language: "java"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: "String kept = \"yes\";"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan *wire.ExecError, 1)
	spinning := make(chan struct{})
	go func() {
		var ee *wire.ExecError
		err := c.RunCodeStream(ctx, wire.RunCodeRequest{Context: cc, Code: "System.out.println(\"spinning\"); while (true) { }"}, func(ev client.Event) error {
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
	if ee := <-done; ee == nil || ee.Name != "Interrupted" || time.Since(start) > 10*time.Second {
		t.Fatalf("interrupted cell: error %+v after %s", ee, time.Since(start))
	}
	if ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: "kept"}); err != nil || ex.Text() != `"yes"` {
		t.Fatalf("after the interrupt: %+v %v", ex, err)
	}
}

// TestCodeGoCells: a go context keeps the declarations and imports of
// cells that ran, runs a cell's main (or its statements), and leaves its
// state as it was after a cell that failed.
func TestCodeGoCells(t *testing.T) {
	_, c := startSessionServer(t, goTestConfig(t))
	cc, err := c.CreateContext(sessionCtx(t), wire.CodeContext{Language: "golang"})
	if err != nil || cc.Language != "go" {
		t.Fatalf("create: %+v %v", cc, err)
	}
	runCells(t, c, cc, []langCell{
		{name: "program", code: "package main\nimport \"fmt\"\nfunc main() { fmt.Print(\"hi\"); result := 2+2; fmt.Print(result) }", stdout: "hi4"},
		{name: "declarations only", code: "import \"strings\"\n\n// Shout is kept.\nfunc Shout(s string) string { return strings.ToUpper(s) + \"!\" }\ntype T struct{ N int }"},
		{name: "statements use them", code: "import \"fmt\"\nfmt.Println(Shout(\"hey\"), T{N: 3}.N)", stdout: "HEY! 3\n"},
		{name: "compile error", code: "func Broken() int { return \"x\" }", ename: "CommandExecError", tb: "cannot use"},
		{name: "failed cell not kept", code: "import \"fmt\"\nfmt.Println(Shout(\"ok\"))", stdout: "OK!\n"},
		{name: "replace, imports pruned", code: "func Shout(s string) string { return s + \"?\" }"},
		{name: "replaced", code: "import \"fmt\"\nfunc main() { fmt.Println(Shout(\"why\")) }", stdout: "why?\n"},
		{name: "exit status", code: "import \"os\"\nos.Exit(3)", ename: "CommandExecError", tb: "3"},
	})
}

// TestCodeGoBusyInterrupt: a second cell while one runs is refused with
// CONFLICT; DELETE /code ends the running one, and the context goes on.
func TestCodeGoBusyInterrupt(t *testing.T) {
	_, c := startSessionServer(t, goTestConfig(t))
	ctx := sessionCtx(t)
	cc, err := c.CreateContext(ctx, wire.CodeContext{Language: "go"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	running := make(chan struct{})
	go func() {
		done <- c.RunCodeStream(ctx, wire.RunCodeRequest{Context: cc, Code: "import (\n\t\"fmt\"\n\t\"time\"\n)\nfmt.Println(\"sleeping\")\ntime.Sleep(time.Minute)"}, func(ev client.Event) error {
			if ev.Type == wire.EventStdout {
				close(running)
			}
			return nil
		})
	}()
	<-running
	if _, err := c.RunCode(ctx, wire.RunCodeRequest{Context: cc, Code: "func F() {}"}); client.CodeOf(err) != sandbox.CodeConflict {
		t.Fatalf("second cell while one runs: %v, want CONFLICT", err)
	}
	start := time.Now()
	if err := c.InterruptCode(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("interrupted cell: %v after %s", err, time.Since(start))
	}
	runCells(t, c, cc, []langCell{{name: "after the interrupt", code: "import \"fmt\"\nfmt.Print(\"ok\")", stdout: "ok"}})
}

// TestCodeLanguageMissing: java without a JDK and go without the go
// command are refused with NOT_SUPPORTED, naming what the box offers.
func TestCodeLanguageMissing(t *testing.T) {
	_, c := startSessionServer(t, Config{Java: "/nonexistent/java", Go: "/nonexistent/go"})
	for _, lang := range []string{"java", "go"} {
		_, err := c.CreateContext(sessionCtx(t), wire.CodeContext{Language: lang})
		if client.CodeOf(err) != sandbox.CodeNotSupported || !strings.Contains(err.Error(), "bash") {
			t.Fatalf("%s: want NOT_SUPPORTED naming the languages offered, got %v", lang, err)
		}
	}
}

// TestParseGoCell: how cells split into imports, declarations and main,
// and which imports the program keeps.
func TestParseGoCell(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		imports    []string // paths
		decls      []string // names of each declaration, joined by ","
		main       bool
		err        bool
	}{
		{name: "program", code: "package main\nimport \"fmt\"\nfunc main() { fmt.Println(1) }", imports: []string{"fmt"}, main: true},
		{name: "declarations", code: "import (\n\t\"os\"\n\tstr \"strings\"\n)\nconst A, B = 1, 2\nvar _ = os.Args\ntype T int\nfunc (t *T) M() {}\nfunc F() {}", imports: []string{"os", "strings"}, decls: []string{"A,B", "", "T", "T.M", "F"}},
		{name: "statements after imports", code: "import \"fmt\"\nx := 1\nfmt.Println(x)", imports: []string{"fmt"}, main: true},
		{name: "statements only", code: "println(1)", main: true},
		{name: "not go", code: "func (", err: true},
	} {
		cell, err := parseGoCell(tc.code)
		if (err != nil) != tc.err {
			t.Fatalf("%s: error %v", tc.name, err)
		}
		if err != nil {
			continue
		}
		var imports, decls []string
		for _, im := range cell.imports {
			imports = append(imports, im.path)
		}
		for _, d := range cell.decls {
			decls = append(decls, strings.Join(d.names, ","))
		}
		if strings.Join(imports, " ") != strings.Join(tc.imports, " ") || strings.Join(decls, " ") != strings.Join(tc.decls, " ") || (cell.main != "") != tc.main {
			t.Fatalf("%s: imports %q decls %q main %q", tc.name, imports, decls, cell.main)
		}
	}
	// Unused imports are left out of the program; aliased ones go by their alias.
	cell, err := parseGoCell("import (\n\t\"fmt\"\n\t\"os\"\n\tstr \"strings\"\n)\nfmt.Println(str.ToUpper(\"a\"))")
	if err != nil {
		t.Fatal(err)
	}
	src := goProgram(cell.imports, cell.decls, cell)
	if !strings.Contains(src, `import "fmt"`) || !strings.Contains(src, `import str "strings"`) || strings.Contains(src, `"os"`) {
		t.Fatalf("program:\n%s", src)
	}
	for p, want := range map[string]string{"fmt": "fmt", "math/rand/v2": "rand", "gopkg.in/yaml.v3": "yaml", "github.com/x/go-foo": "foo"} {
		if got := goPackageName(p); got != want {
			t.Fatalf("goPackageName(%q) = %q, want %q", p, got, want)
		}
	}
}
