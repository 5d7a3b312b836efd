package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testenv"
)

// TestRunReplicasSmoke runs `astrabox bench replicas` small: two real
// replicas on a scratch PostgreSQL database, one takeover and a few
// notifications, so the command cannot rot. Every row has its samples and
// its reference where it has one, and the table prints; no figure is
// checked against a threshold. It needs root (the native backend) and
// PostgreSQL (ASTRABOX_TEST_POSTGRES).
func TestRunReplicasSmoke(t *testing.T) {
	testenv.NeedRoot(t)
	dsn := os.Getenv("ASTRABOX_TEST_POSTGRES")
	testenv.Need(t, dsn != "", "PostgreSQL (ASTRABOX_TEST_POSTGRES)")
	bin := testenv.AstraboxBinary(t)
	dir, err := os.MkdirTemp("", "astrabox-bench-replicas-") // not t.TempDir: its parent is closed to box users
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil { // traversable by the users boxes run as
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := RunReplicas(ctx, ReplicasConfig{Binary: bin, Dir: dir, Postgres: dsn, Takeovers: 1, N: 2, Lease: 1, Progress: &progress})
	if err != nil {
		t.Fatalf("RunReplicas: %v\nprogress:\n%s", err, progress.String())
	}
	want := map[string]bool{ // scenario: has a reference
		"log append via store A → follower via store B":                     true,
		"input accepted → follower on the other replica sees it":            true,
		"input to a non-holder → holder starts the reply":                   true,
		"takeover: kill -9 of the holder → next frame on the other replica": false,
	}
	for _, r := range rep.Rows {
		hasRef, ok := want[r.Scenario]
		if !ok {
			t.Errorf("unexpected row %q", r.Scenario)
			continue
		}
		delete(want, r.Scenario)
		if r.Subject.N == 0 || hasRef != (r.Reference != nil) || (r.Reference != nil && r.Reference.N == 0) {
			t.Errorf("%s: samples or reference missing: %+v", r.Scenario, r)
		}
	}
	for s := range want {
		t.Errorf("no row %q", s)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	t.Log(table.String())
	if !strings.Contains(table.String(), "astrabox bench replicas (") || !strings.Contains(table.String(), "| takeover: kill -9") {
		t.Errorf("table:\n%s", table.String())
	}
}
