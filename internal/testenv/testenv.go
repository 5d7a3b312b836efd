// Package testenv decides what a test does when something it needs is
// missing: outside CI it skips with the reason; in CI (CI=true) it fails,
// because CI installs every tier and a silent skip would hide a gap.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// inCI reports whether the tests run in CI.
func inCI() bool { return os.Getenv("CI") == "true" }

// Need skips (or, in CI, fails) the test when ok is false.
func Need(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if inCI() {
		t.Fatalf("%s is required in CI but unavailable", what)
	}
	t.Skipf("skipped: %s is unavailable", what)
}

// NeedRoot requires running as root.
func NeedRoot(t testing.TB) { t.Helper(); Need(t, os.Geteuid() == 0, "root") }

// NeedCommand requires an executable on PATH.
func NeedCommand(t testing.TB, name string) {
	t.Helper()
	_, err := exec.LookPath(name)
	Need(t, err == nil, name)
}
