package app

import (
	"context"
	"net"
	"strings"
	"testing"
)

// TestCLIRefusesBadInput: what would make a box that never expires or a
// label without a value is refused before anything is sent, and an error
// says what to do without repeating its prefix.
func TestCLIRefusesBadInput(t *testing.T) {
	// A port nothing listens on: no server answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	env := func(k string) string {
		switch k {
		case "ASTRABOX_URL":
			return url
		case "ASTRABOX_API_KEY":
			return "key"
		}
		return ""
	}
	run := func(args ...string) (int, string) {
		out, errOut := newOutBuffer(), newOutBuffer()
		code := Main(context.Background(), args, IO{Stdin: strings.NewReader(""), Stdout: out, Stderr: errOut}, env)
		return code, errOut.String()
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "create", "--timeout", "-5"}, "0 (never) or more"},
		{[]string{"sandbox", "create", "--idle-timeout", "-1"}, "0 (never) or more"},
		{[]string{"sandbox", "create", "--label", "x"}, `"x" is not KEY=VALUE`},
		{[]string{"sandbox", "create", "--env", "=v"}, `"=v" is not KEY=VALUE`},
		{[]string{"sandbox", "ls", "--label", "team"}, `"team" is not KEY=VALUE`},
		{[]string{"sandbox", "ls"}, "is the server running?"},
	} {
		code, stderr := run(tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("astrabox %s: exit %d, stderr %q; want a refusal with %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
		if strings.Contains(stderr, "astrabox: astrabox") || strings.Contains(stderr, ": astrabox:") {
			t.Errorf("astrabox %s: the error repeats its prefix: %q", strings.Join(tc.args, " "), stderr)
		}
	}
}

// TestUnescapeHTML: tool input shows <, > and & as themselves, and no other
// escape changes.
func TestUnescapeHTML(t *testing.T) {
	for in, want := range map[string]string{
		`{"cmd":"a \u003e b \u0026\u0026 c \u003c d"}`: `{"cmd":"a > b && c < d"}`,
		`{"cmd":"\\u003e stays"}`:                      `{"cmd":"\\u003e stays"}`,
		`{"cmd":"\u00e9 \n \"q\""}`:                    `{"cmd":"\u00e9 \n \"q\""}`,
		`"\u003E\u003C"`:                               `"><"`,
		`plain`:                                        `plain`,
		`trailing \`:                                   `trailing \`,
	} {
		if got := unescapeHTML(in); got != want {
			t.Errorf("unescapeHTML(%s) = %s, want %s", in, got, want)
		}
	}
}
