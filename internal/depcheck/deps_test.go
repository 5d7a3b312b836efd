// Package depcheck holds the test of the tree's dependency rules (see the
// README's package table): contracts import only the standard library,
// each heavy client library stays in its one package, providers and
// adapters stay apart from the server.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/astrabox/astrabox"

// imports returns each package of the module with its direct imports
// (tests excluded).
func imports(t *testing.T) map[string][]string {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[strings.TrimPrefix(f[0], module+"/")] = f[1:]
	}
	return m
}

func isStd(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

func TestDependencyRules(t *testing.T) {
	pkgs := imports(t)
	if len(pkgs) < 20 {
		t.Fatalf("only %d packages listed", len(pkgs))
	}
	// owners: a heavy library and the one package that may import it.
	owners := map[string]string{
		"github.com/moby/moby": "provider/docker",
		"github.com/jackc/pgx": "store/postgres",
		"k8s.io/client-go":     "provider/kubernetes",
	}
	for pkg, imps := range pkgs {
		for _, imp := range imps {
			for lib, owner := range owners {
				if strings.HasPrefix(imp, lib) && pkg != owner && !strings.HasPrefix(pkg, owner+"/") {
					t.Errorf("%s imports %s, which only %s may import", pkg, imp, owner)
				}
			}
			local := strings.TrimPrefix(imp, module+"/")
			switch {
			case pkg == "sandbox" || pkg == "platform/wire" || pkg == "platform/engine":
				// Contracts: the standard library, and for the adapter
				// contract the platform's wire vocabulary.
				if !isStd(imp) && !(pkg == "platform/engine" && local == "platform/wire") {
					t.Errorf("%s must import only the standard library, not %s", pkg, imp)
				}
			case pkg == "api/httpx":
				// The API's shared HTTP helpers: the standard library and
				// the sandbox contract (its error codes) only.
				if !isStd(imp) && local != "sandbox" {
					t.Errorf("%s must import only the standard library and sandbox, not %s", pkg, imp)
				}
			case strings.HasPrefix(pkg, "provider/") && strings.HasPrefix(local, "provider/") && !strings.HasPrefix(local, pkg):
				t.Errorf("provider %s imports another provider %s", pkg, local)
			case strings.HasPrefix(pkg, "provider/") && local == "api/wire":
				// The lifecycle API's wire types (standard library only):
				// what a backend that is itself a lifecycle service speaks.
			case strings.HasPrefix(pkg, "provider/") && (strings.HasPrefix(local, "api") || strings.HasPrefix(local, "lifecycle") ||
				strings.HasPrefix(local, "store") || strings.HasPrefix(local, "platform")):
				t.Errorf("provider %s imports the server's %s", pkg, local)
			case strings.HasPrefix(pkg, "platform/engine/") && pkg != "platform/engine/enginetest" &&
				(strings.HasPrefix(local, "store") || strings.HasPrefix(local, "api") || strings.HasPrefix(local, "lifecycle")):
				t.Errorf("adapter %s imports %s", pkg, local)
			}
		}
	}
}

// TestEveryPackageHasDoc: every package of the module with non-test files
// has a package doc comment, saying what the package is for. (A package
// of tests only documents itself in its test files.)
func TestEveryPackageHasDoc(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{len .GoFiles}} {{if .Doc}}doc{{end}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[1] != "0" {
			t.Errorf("package %s has no package doc comment", f[0])
		}
	}
}
