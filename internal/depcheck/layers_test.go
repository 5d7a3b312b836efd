package depcheck

import (
	"strings"
	"testing"
)

// under reports whether pkg (a path in the module) is root or a package
// below it.
func under(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }

// inSandboxLayer reports whether pkg belongs to the sandbox layer: the
// contract, the backends, the in-box daemon, the lifecycle service and
// the egress proxy.
func inSandboxLayer(pkg string) bool {
	for _, root := range []string{"sandbox", "provider", "execd", "lifecycle", "egress"} {
		if under(pkg, root) {
			return true
		}
	}
	return false
}

// implementation reports whether pkg is a concrete backend or store: what
// wiring chooses and builds.
func implementation(pkg string) bool {
	return strings.HasPrefix(pkg, "provider/") || pkg == "store/sqlite" || pkg == "store/postgres"
}

// wires reports whether pkg may import implementations: the wiring
// package (internal/app), the server and its test harness
// (internal/server/...), and what they open backends and benchmarks
// with (internal/backends, internal/bench), and the developer tools under
// hack/. An implementation's own packages (its tests' helpers) may import
// it too.
func wires(pkg string) bool {
	for _, root := range []string{"internal/app", "internal/server", "internal/backends", "internal/bench", "hack"} {
		if under(pkg, root) {
			return true
		}
	}
	return false
}

// serverPackage reports whether pkg is part of the server, which the SDK
// must not import: everything but the wire contracts, the execd client
// and the small leaf helpers.
func serverPackage(pkg string) bool {
	switch {
	case pkg == "api/wire", under(pkg, "platform/wire"), pkg == "platform/engine",
		pkg == "execd/client", pkg == "execd/wire":
		return false
	}
	for _, root := range []string{"api", "lifecycle", "platform", "store", "provider", "egress", "vault", "image", "execd",
		"console", "internal/server", "internal/app", "internal/backends", "internal/bench"} {
		if under(pkg, root) {
			return true
		}
	}
	return false
}

// TestLayering checks the layering (see the README's package table): the
// sandbox layer imports nothing of the agent platform (platform/...,
// nor its routes, api/platformapi);
// only the wiring packages import the implementations of backends and
// stores; the SDK (client/...) imports no server package.
func TestLayering(t *testing.T) {
	pkgs := imports(t)
	for pkg, imps := range pkgs {
		for _, imp := range imps {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			local := strings.TrimPrefix(imp, module+"/")
			if inSandboxLayer(pkg) && under(local, "platform") {
				t.Errorf("%s (sandbox layer) imports %s (agent platform)", pkg, local)
			}
			if inSandboxLayer(pkg) && under(local, "api/platformapi") {
				t.Errorf("%s (sandbox layer) imports %s (the agent platform's routes)", pkg, local)
			}
			if implementation(local) && !wires(pkg) && !under(pkg, local) {
				t.Errorf("%s imports the implementation %s: only the wiring packages may", pkg, local)
			}
			if under(pkg, "client") && serverPackage(local) {
				t.Errorf("%s (the SDK) imports the server package %s", pkg, local)
			}
		}
	}
}
