package app

import (
	"context"
	"strings"
	"testing"
)

// TestEveryCommandHasHelp: `astrabox CMD --help`, and `astrabox CMD VERB
// --help` for every sub-command, print a usage and exit 0 (no server is
// needed, nothing runs).
func TestEveryCommandHasHelp(t *testing.T) {
	run := func(args ...string) (int, string) {
		out, errOut := newOutBuffer(), newOutBuffer()
		code := Main(context.Background(), args, IO{Stdin: strings.NewReader(""), Stdout: out, Stderr: errOut}, func(string) string { return "" })
		return code, out.String() + errOut.String()
	}
	for _, c := range commands() {
		for _, h := range []string{"--help", "-h"} {
			code, out := run(c.name, h)
			if code != 0 || !strings.Contains(strings.ToLower(out), "usage") && c.name != "version" {
				t.Errorf("astrabox %s %s: exit %d, %q", c.name, h, code, out)
			}
		}
		for _, v := range c.verbs {
			if strings.HasPrefix(v[0], "(") || strings.HasPrefix(v[0], "-") {
				continue
			}
			code, out := run(c.name, strings.Split(v[0], "|")[0], "--help")
			if code != 0 || !strings.Contains(strings.ToLower(out), "usage") {
				t.Errorf("astrabox %s %s --help: exit %d, %q", c.name, v[0], code, out)
			}
		}
	}
	if code, out := run("sandbox", "nope"); code != 2 || !strings.Contains(out, `unknown command "nope"`) || !strings.Contains(out, "renew") {
		t.Errorf("an unknown sub-command: exit %d, %q", code, out)
	}
}
