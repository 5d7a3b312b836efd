package process_test

import (
	"context"
	"os"
	"testing"

	"github.com/astrabox/astrabox/internal/app"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// TestMain lets the test binary act as the astrabox binary: the harness
// re-executes it with ASTRABOX_TEST_MAIN=1 to start execd.
func TestMain(m *testing.M) {
	if os.Getenv("ASTRABOX_TEST_MAIN") == "1" {
		ctx, stop := app.SignalContext(context.Background())
		code := app.Main(ctx, os.Args[1:], app.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, app.OSEnv)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

type harness struct {
	p   *process.Provider
	cfg process.Config
}

func (h harness) Provider() sandbox.Provider { return h.p }
func (h harness) Spec() sandbox.Spec         { return sandbox.Spec{Image: "host"} }

// Reopen implements sandboxtest.Reopener: a Provider on the same Dir. A
// process Provider holds nothing that needs releasing.
func (h harness) Reopen(t *testing.T) sandbox.Provider {
	p, err := process.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	cfg := process.Config{
		Dir:     t.TempDir(),
		Command: []string{os.Args[0]},
		Env:     []string{"ASTRABOX_TEST_MAIN=1"},
	}
	p, err := process.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, harness{p, cfg})
}
