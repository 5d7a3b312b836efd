package execd

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// Go code contexts.
//
// A go context is a bash session (session.go) and a directory of its own,
// with no interpreter: each cell is compiled into a program with the box's
// go command and run by the session, so its output streams and DELETE
// /code interrupts it as a session run. Between cells the context keeps
// what the cells declared, as a notebook does:
//
//   - A cell is Go source with or without a package clause. One that parses
//     as a file's top level (imports and declarations) adds or replaces
//     (by name) the context's declarations; one that does not is taken as
//     statements, after its leading imports, and becomes the body of main.
//   - The program is package main: the context's imports that the program
//     refers to, its declarations, the cell's, and the cell's func main (an
//     empty one when it has none, so a cell of declarations is compiled
//     and not run). It runs in the session's working directory.
//   - A cell's imports and declarations (never main) are kept only when its
//     run exited with 0: a cell that fails to compile or fails leaves the
//     context as it was.
//
// Only the standard library can be imported (the program is built without
// a module); GOTOOLCHAIN is local, so the box's toolchain is never
// replaced by a download.

// goImport is one import of a cell: its path and its name, "" for the
// package's own.
type goImport struct {
	path, name string
}

// localName is the name the import binds in the file.
func (im goImport) localName() string {
	if im.name != "" {
		return im.name
	}
	return goPackageName(im.path)
}

// goDecl is a top-level declaration of a cell, as its source text.
type goDecl struct {
	names []string // what it declares: "F", "T", "T.M" for a method
	text  string
	refs  []string // identifiers it uses as X in X.Sel (package names among them)
}

// goCell is a parsed cell.
type goCell struct {
	imports  []goImport
	decls    []goDecl
	main     string   // the body of main, with its braces; "" for none
	mainRefs []string // as goDecl.refs, of main
}

// goCells is the state of a go context.
type goCells struct {
	dir     string   // the context's own directory
	command []string // env assignments and the go command, shell-quoted
	mu      sync.Mutex
	imports []goImport
	decls   []goDecl
	settled chan struct{} // closed once the last run's outcome was applied
}

// goCommand returns the go command for go contexts: cfg.Go on the box's
// PATH, else, for the default, the standard install's.
func goCommand(cfg *Config) (string, error) {
	p, err := lookPath(cfg.Go, cfg.Env)
	if err != nil && cfg.Go == "go" {
		if p2, err2 := lookPath("/usr/local/go/bin/go", cfg.Env); err2 == nil {
			return p2, nil
		}
	}
	return p, err
}

// newGoCells makes the state of a go context, with its directory.
func newGoCells(cfg *Config, id string) (*goCells, error) {
	goBin, err := goCommand(cfg)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.CodeNotSupported, "go code contexts need the go command %q, which is not in the box (%v); this box offers: %s",
			cfg.Go, err, strings.Join(offeredLanguages(cfg), ", "))
	}
	dir, err := os.MkdirTemp("", "astrabox-go-"+id+"-")
	if err != nil {
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "go context directory: %v", err)
	}
	cmd := []string{"GOTOOLCHAIN=local"}
	if !hasEnv(cfg.Env, "HOME") && !hasEnv(cfg.Env, "GOCACHE") && !hasEnv(cfg.Env, "XDG_CACHE_HOME") {
		cmd = append(cmd, "GOCACHE="+shellQuote(filepath.Join(dir, "cache")))
	}
	settled := make(chan struct{})
	close(settled)
	return &goCells{dir: dir, command: append(cmd, shellQuote(goBin)), settled: settled}, nil
}

func hasEnv(env []string, key string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
}

// remove deletes the context's directory.
func (g *goCells) remove() { _ = os.RemoveAll(g.dir) }

// prepare writes the program of cell code and returns the command line
// that builds and runs it, and settle, which the caller must call once
// with the run's outcome (or false when the run did not start). The next
// prepare waits for it, up to markerIdle (a finished run settles at once).
// Errors: INVALID_REQUEST_BODY for a cell that is not Go, CONFLICT while
// another cell runs.
func (g *goCells) prepare(code string) (cmdline string, settle func(ok bool), err error) {
	cell, err := parseGoCell(code)
	if err != nil {
		return "", nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "go cell: %v", err)
	}
	g.mu.Lock()
	prev := g.settled
	g.mu.Unlock()
	wait := time.NewTimer(markerIdle)
	defer wait.Stop()
	select {
	case <-prev:
	case <-wait.C:
		return "", nil, sandbox.Errorf(sandbox.CodeConflict, "go context busy: another execution is in progress")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	imports, decls := g.merged(cell)
	src := goProgram(imports, decls, cell)
	if err := os.WriteFile(filepath.Join(g.dir, "main.go"), []byte(src), 0o600); err != nil {
		return "", nil, sandbox.Errorf(sandbox.CodeRuntime, "write go cell: %v", err)
	}
	// The build runs in a subshell in the context's directory (no go.mod
	// there or above), the program in the session's working directory.
	build := "( CDPATH= cd -- " + shellQuote(g.dir) + " && " + strings.Join(g.command, " ") + " build -o cell main.go )"
	cmdline = build
	if cell.main != "" {
		cmdline = build + " && " + shellQuote(filepath.Join(g.dir, "cell"))
	}
	done := make(chan struct{})
	g.settled = done
	var once sync.Once
	settle = func(ok bool) {
		once.Do(func() {
			if ok {
				g.mu.Lock()
				g.imports, g.decls = imports, decls
				g.mu.Unlock()
			}
			close(done)
		})
	}
	return cmdline, settle, nil
}

// merged returns the context's imports and declarations with the cell's
// added; a cell's declaration replaces those that declare any of its
// names.
func (g *goCells) merged(cell goCell) ([]goImport, []goDecl) {
	// A cell's import replaces one of the same package name.
	var imports []goImport
	for _, im := range g.imports {
		if !slices.ContainsFunc(cell.imports, func(n goImport) bool { return n.localName() == im.localName() }) {
			imports = append(imports, im)
		}
	}
	imports = append(imports, cell.imports...)
	var decls []goDecl
	for _, d := range g.decls {
		if !slices.ContainsFunc(cell.decls, func(n goDecl) bool {
			return slices.ContainsFunc(n.names, func(s string) bool { return slices.Contains(d.names, s) })
		}) {
			decls = append(decls, d)
		}
	}
	decls = append(decls, cell.decls...)
	return imports, decls
}

// goProgram is the source of the program: the imports it refers to, the
// declarations, and the cell's main.
func goProgram(imports []goImport, decls []goDecl, cell goCell) string {
	refs := map[string]bool{}
	for _, d := range decls {
		for _, r := range d.refs {
			refs[r] = true
		}
	}
	for _, r := range cell.mainRefs {
		refs[r] = true
	}
	main := cell.main
	var b strings.Builder
	b.WriteString("package main\n\n")
	for _, im := range imports {
		if name := im.localName(); name != "_" && name != "." && !refs[name] {
			continue // an unused import does not compile
		}
		if im.name != "" {
			fmt.Fprintf(&b, "import %s %s\n", im.name, strconv.Quote(im.path))
		} else {
			fmt.Fprintf(&b, "import %s\n", strconv.Quote(im.path))
		}
	}
	for _, d := range decls {
		b.WriteString("\n" + d.text + "\n")
	}
	if main == "" {
		main = "{}"
	}
	b.WriteString("\nfunc main() " + main + "\n")
	return b.String()
}

var goMajorVersion = regexp.MustCompile(`^v[0-9]+$`)

// goPackageName guesses the name an import path's package declares, as
// goimports does: its last element, without a major version element or
// suffix and a "go-" prefix.
func goPackageName(p string) string {
	base := path.Base(p)
	if goMajorVersion.MatchString(base) && path.Dir(p) != "." {
		base = path.Base(path.Dir(p))
	}
	if i := strings.Index(base, ".v"); i > 0 {
		base = base[:i]
	}
	base = strings.TrimPrefix(base, "go-")
	return strings.NewReplacer("-", "_", ".", "_").Replace(base)
}

// parseGoCell parses a cell: a top level of imports and declarations (a
// package clause is allowed and ignored), or leading imports followed by
// statements, which become main's body.
func parseGoCell(code string) (goCell, error) {
	src := code
	if !hasPackageClause(code) {
		src = "package main\n" + code
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "cell.go", src, parser.ParseComments|parser.SkipObjectResolution)
	if err == nil {
		return goCellOf(fset, f, src)
	}
	head, herr := parser.ParseFile(fset, "cell.go", src, parser.ImportsOnly|parser.SkipObjectResolution)
	if herr != nil {
		return goCell{}, err
	}
	end := fset.Position(head.Name.End()).Offset
	for _, d := range head.Decls {
		end = fset.Position(d.End()).Offset
	}
	body := "{\n" + src[end:] + "\n}"
	wrapped := src[:end] + "\nfunc main() " + body + "\n"
	fset = token.NewFileSet()
	f, werr := parser.ParseFile(fset, "cell.go", wrapped, parser.ParseComments|parser.SkipObjectResolution)
	if werr != nil {
		return goCell{}, errors.Join(err, werr)
	}
	return goCellOf(fset, f, wrapped)
}

// hasPackageClause reports whether code starts, after comments and space,
// with a package clause.
func hasPackageClause(code string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "cell.go", code, parser.PackageClauseOnly)
	return err == nil && f.Name != nil
}

// goCellOf collects a parsed cell's imports, declarations (as their source
// text, comments included), main's body and references.
func goCellOf(fset *token.FileSet, f *ast.File, src string) (goCell, error) {
	text := func(from, to token.Pos) string {
		return src[fset.Position(from).Offset:fset.Position(to).Offset]
	}
	var cell goCell
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			return goCell{}, fmt.Errorf("import %s: %w", im.Path.Value, err)
		}
		gi := goImport{path: p}
		if im.Name != nil {
			gi.name = im.Name.Name
		}
		cell.imports = append(cell.imports, gi)
	}
	for _, d := range f.Decls {
		start := d.Pos()
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				continue
			}
			if d.Doc != nil {
				start = d.Doc.Pos()
			}
			var names []string
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name != "_" {
							names = append(names, n.Name)
						}
					}
				}
			}
			cell.decls = append(cell.decls, goDecl{names: names, text: text(start, d.End()), refs: selectorRefs(d)})
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "main" {
				if d.Body != nil {
					cell.main, cell.mainRefs = text(d.Body.Pos(), d.Body.End()), selectorRefs(d)
				}
				continue
			}
			if d.Doc != nil {
				start = d.Doc.Pos()
			}
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) > 0 {
				name = receiverType(d.Recv.List[0].Type) + "." + name
			}
			cell.decls = append(cell.decls, goDecl{names: []string{name}, text: text(start, d.End()), refs: selectorRefs(d)})
		}
	}
	return cell, nil
}

// selectorRefs lists the identifiers n uses as X in X.Sel, once each.
func selectorRefs(n ast.Node) []string {
	var out []string
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && !slices.Contains(out, id.Name) {
				out = append(out, id.Name)
			}
		}
		return true
	})
	return out
}

// receiverType is the name of a method's receiver type.
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}
