package readme_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// firstSession is README.md's "A first session" shell block, as written.
func firstSession(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n## A first session\n.*?```sh\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal(`README.md has no "## A first session" section with a sh block`)
	}
	return string(m[1])
}

// TestREADMEFirstSession runs the README's first session as a newcomer
// pastes it into a root shell at the repository: its own server on the
// default address and data dir, made private to the test (a network
// namespace with its own 127.0.0.1:8080, a mount namespace with an empty
// /var/lib), `make build` standing for the build the test did already.
// Every line must succeed, in order; the python3 line must print 42.
// Afterwards the server is stopped and `astrabox uninstall` removes what
// it left.
func TestREADMEFirstSession(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "unshare")
	testenv.NeedCommand(t, "ip")
	testenv.NeedCommand(t, "python3")
	block := firstSession(t)
	bin := testenv.AstraboxBinary(t)
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "bin", "astrabox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "set -euo pipefail\n" +
		"make() { echo \"(make $*: built by the test)\"; }\n" +
		block +
		"kill %1 && wait %1 || true\n"
	if err := os.WriteFile(filepath.Join(work, "first-session.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	// The namespace's setup, then the block; whatever the block did, the
	// data dir is uninstalled before the namespace ends.
	outer := `set -u
mount --make-rprivate /
mount -t tmpfs -o mode=0755 tmpfs /var/lib
ip link set lo up
bash ./first-session.sh; rc=$?
./bin/astrabox uninstall --data-dir /var/lib/astrabox --yes >/dev/null 2>&1 || echo "uninstall failed"
exit $rc`
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc", "bash", "-c", outer)
	cmd.Dir = work
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("README.md's first session failed (%v):\n%s\n--- as run:\n%s", err, out.String(), script)
	}
	if !regexp.MustCompile(`(?m)^42$`).Match(out.Bytes()) || strings.Contains(out.String(), "uninstall failed") {
		t.Fatalf("README.md's first session did not print 42, or its server's remains were not removed:\n%s", out.String())
	}
	t.Logf("README.md's first session:\n%s", out.String())
}
