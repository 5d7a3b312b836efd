// Package nodetest runs the project's Node.js test programs from Go tests
// (a test helper, not a product feature): the real npm clients AstraBox is
// checked against (compat/) and the web console's suites (console/).
package nodetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Timeout is at most max, leaving a minute of the test binary's deadline
// for cleanup.
func Timeout(t *testing.T, max time.Duration) time.Duration {
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - time.Minute; left < max {
			return left
		}
	}
	return max
}

// NPM runs npm with args in dir and fails the test, quoting npm's
// output, unless it succeeds.
func NPM(ctx context.Context, t testing.TB, dir string, args ...string) {
	t.Helper()
	if err := RunNPM(ctx, dir, args...); err != nil {
		t.Fatal(err)
	}
}

// RunNPM is NPM returning the failure instead (for a sync.Once).
func RunNPM(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm %s: %w\n%s", strings.Join(args, " "), err, Indent(string(out)))
	}
	return nil
}

// tapSummary matches the counters node's TAP reporter ends with.
var tapSummary = regexp.MustCompile(`(?m)^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$`)

// RunTAP runs `node --test` on script in dir with the TAP reporter and
// vars added to the environment. It fails the test, quoting node's output,
// unless node exits 0 and its summary counts exactly tests tests, all
// passed: a test that was skipped or never ran fails it too.
func RunTAP(ctx context.Context, t testing.TB, dir, script string, tests int, vars map[string]string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=tap", script)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	counts := map[string]int{}
	for _, m := range tapSummary.FindAllStringSubmatch(out.String(), -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	want := map[string]int{"tests": tests, "pass": tests, "fail": 0, "cancelled": 0, "skipped": 0, "todo": 0}
	var bad []string
	for k, v := range want {
		if counts[k] != v {
			bad = append(bad, fmt.Sprintf("%s %d (want %d)", k, counts[k], v))
		}
	}
	slices.Sort(bad)
	if err != nil || len(bad) > 0 {
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("node --test %s: %v\n%s", script, err, Indent(out.String()))
		}
		t.Fatalf("node --test %s: %v, summary %v; its output:\n%s", script, err, bad, Indent(out.String()))
	}
	t.Logf("node --test %s passed %d tests:\n%s", script, tests, Indent(out.String()))
}

// Indent indents every line of s, for output quoted in a test log.
func Indent(s string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		b.WriteString("    " + sc.Text() + "\n")
	}
	return b.String()
}
