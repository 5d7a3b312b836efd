package agent

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/wait"
)

func TestInterruptMidStream(t *testing.T) {
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	model := fakemodel.New(t,
		fakemodel.Text("partial answer, the rest never arrives").HoldUntil(gate),
		fakemodel.Text("second answer"),
	)
	h := startAgent(t, testConfig(t, model))
	h.send(map[string]string{"type": "interrupt"})
	h.waitFor("idle interrupt log", func(e event) bool { return e.typ() == "log" && strings.Contains(e.str("message"), "no reply") })

	h.input("in_1", "long task")
	h.input("in_2", "next")
	first := h.waitType("text.delta")
	h.send(map[string]string{"type": "interrupt"})
	end := h.waitEnd("in_1")
	if end.str("outcome") != outcomeInterrupted || end["error"] != nil {
		t.Fatalf("turn.end %v", end)
	}
	// The queued input stays queued and is answered next.
	if end := h.waitEnd("in_2"); end.str("outcome") != outcomeCompleted {
		t.Fatalf("turn.end %v", end)
	}
	types := h.types()
	i := slices.Index(types, "turn.end")
	if i < 2 || types[i-1] != "step.finish" || types[i-2] != "text.end" {
		t.Fatalf("the interrupted reply did not close its parts: %v", types)
	}
	reqs := model.Requests()
	want := "user: long task\nassistant: " + first.str("delta") + "\nuser: next\n"
	if got := reqs[1].Transcript(); !strings.HasSuffix(got, want) {
		t.Fatalf("history after the interrupt\n%s\nwant it to end with\n%s", got, want)
	}
}

func TestInterruptMidShellKillsTheProcessGroup(t *testing.T) {
	model := fakemodel.New(t,
		fakemodel.Call(toolShell, map[string]string{"command": "echo $$ > pgid; sleep 1000 & sleep 1000"}),
		fakemodel.Text("after"),
	)
	cfg := testConfig(t, model)
	h := startAgent(t, cfg)
	h.input("in_1", "run forever")
	pgid := waitPGID(t, filepath.Join(cfg.Workspace, "pgid"))
	wait.Until(t, waitLimit, "the command's processes", func() bool { return len(groupMembers(t, pgid)) >= 2 })

	h.send(map[string]string{"type": "interrupt"})
	end := h.waitEnd("in_1")
	if end.str("outcome") != outcomeInterrupted {
		t.Fatalf("turn.end %v", end)
	}
	if h.count(func(e event) bool { return e.typ() == "tool.error" && strings.Contains(e.str("error"), "interrupted") }) != 1 {
		t.Fatalf("no tool.error for the killed command:\n%s", h.dump())
	}
	wait.Until(t, waitLimit, "the process group to be gone", func() bool { return len(groupMembers(t, pgid)) == 0 })

	h.input("in_2", "what happened?")
	h.waitEnd("in_2")
	msgs := model.Requests()[1].Body.Messages
	n := len(msgs)
	if msgs[n-4].Role != roleAssistant || len(msgs[n-4].ToolCalls) != 1 ||
		msgs[n-3].Role != roleTool || !strings.Contains(msgs[n-3].Content, "interrupted") ||
		msgs[n-2].Role != roleAssistant || msgs[n-2].Content != noteInterrupted {
		t.Fatalf("history after the interrupt:\n%s", model.Requests()[1].Transcript())
	}
}

func TestCancelStopsRunAndItsTools(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Call(toolShell, map[string]string{"command": "echo $$ > pgid; exec sleep 1000"}))
	cfg := testConfig(t, model)
	inR, inW := io.Pipe()
	defer inW.Close()
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, inR, out) }()
	if _, err := io.WriteString(inW, `{"type":"input","id":"in_1","content":"go"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	pgid := waitPGID(t, filepath.Join(cfg.Workspace, "pgid"))
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("Run returned %v", err)
	}
	wait.Until(t, waitLimit, "the process group to be gone", func() bool { return len(groupMembers(t, pgid)) == 0 })
	if !strings.Contains(out.String(), `"outcome":"interrupted"`) {
		t.Fatalf("no interrupted turn.end:\n%s", out.String())
	}
}

// waitPGID waits for the process group id a command wrote to path.
func waitPGID(t *testing.T, path string) int {
	t.Helper()
	var pgid int
	wait.Until(t, waitLimit, "the command to start", func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pgid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pgid
}

// groupMembers returns the pids of the living (not zombie) processes in
// process group pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// Fields after the command name, which may hold ") ".
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}
