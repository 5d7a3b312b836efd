package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestRunPlatformSmoke runs `astrabox bench platform` with tiny numbers
// on the process harness, so the command cannot rot: every scenario
// yields its row with samples, the table prints and the JSON reads back.
// No figure is checked against a threshold.
func TestRunPlatformSmoke(t *testing.T) {
	bin := testenv.AstraboxBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := RunPlatform(ctx, PlatformConfig{Backends: []string{"process"}, Binary: bin, Dir: t.TempDir(),
		N: 2, PoolSize: 1, Followers: 3, FollowRounds: 1, FollowDeltas: 5, FollowGap: time.Millisecond,
		AppendFor: 50 * time.Millisecond, Postgres: os.Getenv("ASTRABOX_TEST_POSTGRES"), Progress: &progress,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatalf("RunPlatform: %v\nprogress:\n%s", err, progress.String())
	}
	want := []string{"first token, warm Session", "first token, cold Session from a warm pool", "first token, cold Session, no pool",
		"3 followers, commit → receipt per frame", "resume: after_seq → first replayed frame",
		"log append, batches of 1", "log append, batches of 16", "log append, batches of 64"}
	for _, scenario := range want {
		found := false
		for _, r := range rep.Rows {
			if r.Scenario != scenario {
				continue
			}
			found = true
			if r.Subject.N == 0 || (r.Reference != nil && r.Reference.N == 0) {
				t.Errorf("%s on %s: no samples: %+v", scenario, r.Backend, r)
			}
			if strings.HasPrefix(scenario, "log append") && r.Rate <= 0 {
				t.Errorf("%s on %s: no rate", scenario, r.Backend)
			}
		}
		if !found {
			t.Errorf("no row %q", scenario)
		}
	}
	for _, r := range rep.Rows {
		if strings.HasPrefix(r.Scenario, "first token, cold Session from") && !strings.Contains(r.Note, "2 of 2 boxes claimed") {
			t.Errorf("the pool row's boxes did not all come from the pool: %s", r.Note)
		}
	}
	if os.Getenv("ASTRABOX_TEST_POSTGRES") == "" && len(rep.Notes) == 0 {
		t.Error("no note says the PostgreSQL rows were left out")
	}

	var table bytes.Buffer
	rep.WriteTable(&table)
	t.Log(table.String())
	if !strings.Contains(table.String(), "| first token, warm Session") || !strings.Contains(table.String(), "fake model direct") {
		t.Errorf("table:\n%s", table.String())
	}
	path := filepath.Join(t.TempDir(), "platform.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back PlatformReport
	if err := json.Unmarshal(b, &back); err != nil || len(back.Rows) != len(rep.Rows) {
		t.Fatalf("JSON read back: %v, %d rows of %d", err, len(back.Rows), len(rep.Rows))
	}
}

// testWriter writes to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 23456.7: "23,457", 1234567: "1,234,567"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}
