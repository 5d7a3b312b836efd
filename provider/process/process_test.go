package process_test

import (
	"context"
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"

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

// TestDeadBoxSaysHowItDied: a box whose execd ends on its own is Failed,
// its reason naming the signal or the exit code.
func TestDeadBoxSaysHowItDied(t *testing.T) {
	cfg := process.Config{Dir: t.TempDir(), Command: []string{os.Args[0]}, Env: []string{"ASTRABOX_TEST_MAIN=1"}}
	p, err := process.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		signal syscall.Signal
		want   string
	}{
		{"killed", syscall.SIGKILL, "box_exited: execd was killed by signal 9 (killed)"},
		{"stopped", syscall.SIGTERM, "box_exited: execd exited with exit code 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			info, err := p.Create(ctx, "box-"+tt.name, sandbox.Spec{Image: "host"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Delete(context.Background(), info.ID) })
			var st struct {
				PID int `json:"pid"`
			}
			if err := json.Unmarshal(info.StateBlob, &st); err != nil || st.PID <= 0 {
				t.Fatalf("state blob %s: %v", info.StateBlob, err)
			}
			if err := syscall.Kill(st.PID, tt.signal); err != nil {
				t.Fatal(err)
			}
			for {
				got, err := p.Inspect(ctx, info.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State == sandbox.StateFailed {
					if got.Reason != tt.want {
						t.Fatalf("reason %q, want %q", got.Reason, tt.want)
					}
					return
				}
				select {
				case <-ctx.Done():
					t.Fatalf("the box is still %s", got.State)
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
}
