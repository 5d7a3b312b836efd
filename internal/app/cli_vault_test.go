package app

import (
	"strings"
	"testing"

	"github.com/astrabox/astrabox/internal/server/servertest"
)

// TestCLIVault runs the vault verbs in turn and gives an Agent the vault;
// no command prints a value, nor takes one on its command line.
func TestCLIVault(t *testing.T) {
	env := servertest.New(t, servertest.Options{})
	env.Agent("auto", nil)
	const stdinValue = "stdin-secret-value-0123456789"
	steps := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"create", "", []string{"vault", "create", "--name", "ci", "--description", "CI tokens"}, 0, []string{"vlt_"}, nil},
		{"create, no name", "", []string{"vault", "create"}, 1, nil, []string{"--name is required"}},
		{"set-secret from the environment", "", []string{"vault", "set-secret", "ci", "GH_TOKEN", "--host", "api.github.com", "--value-env", "MY_MODEL_KEY"},
			0, []string{"GH_TOKEN goes to api.github.com in Authorization as \"Bearer {value}\""}, nil},
		{"set-secret from stdin", stdinValue + "\n", []string{"vault", "set-secret", "ci", "NPM_TOKEN", "--host", "registry.npmjs.org",
			"--header", "x-npm-token", "--format", "{value}", "--value-file", "-"}, 0, []string{"NPM_TOKEN goes to registry.npmjs.org in X-Npm-Token"}, nil},
		{"set-secret without a value", "", []string{"vault", "set-secret", "ci", "K", "--host", "a.test"}, 1, nil, []string{"--value-env VAR or --value-file"}},
		{"set-secret, an unset variable", "", []string{"vault", "set-secret", "ci", "K", "--host", "a.test", "--value-env", "UNSET"}, 1, nil, []string{"$UNSET is empty"}},
		{"set-secret refused by the server", "", []string{"vault", "set-secret", "ci", "PATH", "--host", "a.test", "--value-env", "MY_MODEL_KEY"}, 1, nil,
			[]string{"INVALID_REQUEST: ", "reserved"}},
		{"ls", "", []string{"vault", "ls"}, 0, []string{"NAME", "ci", "GH_TOKEN,NPM_TOKEN", "3"}, nil},
		{"get by name", "", []string{"vault", "get", "ci"}, 0, []string{`"name": "GH_TOKEN"`, `"host": "registry.npmjs.org"`}, nil},
		{"get, missing", "", []string{"vault", "get", "nope"}, 1, nil, []string{"VAULT_NOT_FOUND: "}},
		{"agent create with the vault", "", []string{"agent", "create", "--name", "deployer", "--profile", "test", "--vaults", "ci"}, 0, []string{"agt_"}, nil},
		{"agent create, unknown vault", "", []string{"agent", "create", "--name", "x", "--profile", "test", "--vaults", "nope"}, 1, nil, []string{"VAULT_NOT_FOUND: "}},
		{"rm while an Agent has it", "", []string{"vault", "rm", "ci"}, 1, nil, []string{"VAULT_IN_USE: "}},
		{"agent rm", "", []string{"agent", "rm", "deployer"}, 0, nil, nil},
		{"rm-secret", "", []string{"vault", "rm-secret", "ci", "NPM_TOKEN"}, 0, nil, nil},
		{"rm-secret, gone", "", []string{"vault", "rm-secret", "ci", "NPM_TOKEN"}, 1, nil, []string{"VAULT_SECRET_NOT_FOUND: "}},
		{"rm", "", []string{"vault", "rm", "ci"}, 0, nil, nil},
		{"rm, gone", "", []string{"vault", "rm", "ci"}, 1, nil, []string{"VAULT_NOT_FOUND: "}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r := runCLI(t, env, st.stdin, st.args...)
			if r.code != st.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, st.code, r.stdout, r.stderr)
			}
			for _, w := range st.stdout {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			for _, w := range st.stderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if out := r.stdout + r.stderr; strings.Contains(out, servertest.ModelKey) || strings.Contains(out, stdinValue) {
				t.Fatalf("a value was printed:\n%s\n%s", r.stdout, r.stderr)
			}
		})
	}
}
