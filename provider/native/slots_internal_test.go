package native

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/astrabox/astrabox/internal/testenv"
)

// TestReclaimAbandonedSlots: a slot held for a data dir that is gone is
// freed unless its uids still run a process; a slot of a data dir that
// exists, and one whose owner is being written, are kept.
func TestReclaimAbandonedSlots(t *testing.T) {
	testenv.NeedRoot(t) // a process under a slot's uid
	slots, live := t.TempDir(), t.TempDir()
	p := &Provider{cfg: Config{SlotDir: slots}, dataDir: live, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	gone := filepath.Join(t.TempDir(), "removed")
	hold := func(n int, dataDir string) {
		t.Helper()
		if err := os.Mkdir(p.slotDir(n), 0o700); err != nil {
			t.Fatal(err)
		}
		if dataDir != "" {
			if err := os.WriteFile(filepath.Join(p.slotDir(n), slotOwnerFile), []byte(dataDir+"\nbox\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	hold(1, gone) // abandoned: freed
	hold(2, live) // its data dir exists: kept
	hold(3, "")   // its owner being written: kept
	hold(4, gone) // abandoned, but a process runs under its uids: kept
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(hostUID(4) + 1000), Gid: uint32(hostUID(4) + 1000)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	if n := p.reclaimAbandoned(); n != 1 {
		t.Fatalf("reclaimed %d slots, want 1", n)
	}
	for n, kept := range map[int]bool{1: false, 2: true, 3: true, 4: true} {
		if _, err := os.Stat(p.slotDir(n)); (err == nil) != kept {
			t.Errorf("slot %d: %v; want kept %v", n, err, kept)
		}
	}
}
