package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/process"
)

// TestRunSuiteSmoke runs `astrabox bench` with tiny numbers on the process
// harness served in-process (the server wiring serve uses), so that the
// suite cannot rot: each selected scenario yields results and no box is
// left. No figure is checked against a threshold.
func TestRunSuiteSmoke(t *testing.T) {
	bin := testenv.AstraboxBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{bin}})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	rep, err := RunSuite(ctx, SuiteConfig{Targets: []Target{{Name: "process", Provider: p}}, N: 2, Concurrency: []int{2},
		Scenarios: []string{"create", "exec", "concurrent"}, Dir: t.TempDir(), Progress: &progress})
	if err != nil {
		t.Fatalf("RunSuite: %v\nprogress:\n%s", err, progress.String())
	}
	for _, sc := range []string{"create", "exec", "concurrent"} {
		found := false
		for _, r := range rep.Results {
			found = found || r.Backend == "process" && strings.HasPrefix(r.Scenario, sc)
		}
		if !found {
			t.Errorf("no result of scenario %s in %+v", sc, rep.Results)
		}
	}
	if boxes, err := p.List(ctx); err != nil || len(boxes) != 0 {
		t.Fatalf("boxes left: %+v %v", boxes, err)
	}
}
