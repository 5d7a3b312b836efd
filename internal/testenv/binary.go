package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// AstraboxBinary returns the static astrabox binary that sandboxes run in
// tests: $ASTRABOX_TEST_BINARY when set, otherwise the module's
// cmd/astrabox built once per test process with CGO_ENABLED=0 and without
// the race detector, so that boxes run what users run (a race-instrumented
// binary needs several times the memory and threads, which resource-limit
// tests would measure instead). A failed build skips the test, or fails
// it in CI. Packages that call it remove the build by running their tests
// through Main.
func AstraboxBinary(t testing.TB) string {
	t.Helper()
	if path := os.Getenv("ASTRABOX_TEST_BINARY"); path != "" {
		return path
	}
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "astrabox-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(builtDir, "astrabox"), "github.com/astrabox/astrabox/cmd/astrabox")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		Need(t, false, "building the astrabox binary ("+buildErr.Error()+")")
	}
	return filepath.Join(builtDir, "astrabox")
}

// Main runs m's tests, removes what AstraboxBinary built, and returns the
// exit code: func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	return code
}
