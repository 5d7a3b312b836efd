package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
)

// echoModel answers every request with the text of its last message.
func echoModel(t *testing.T, n int) *fakemodel.Server {
	echo := fakemodel.Func(func(r fakemodel.Request) fakemodel.Reply { return fakemodel.Text("echo: " + r.Last().Content) })
	script := make([]fakemodel.Reply, n)
	for i := range script {
		script[i] = echo
	}
	return fakemodel.New(t, script...).WithKey(servertest.ModelKey)
}

// on returns a harness for replica i's API.
func on(t *testing.T, reps []*serveProcess, i int, model *fakemodel.Server, image string) *harness {
	h := &harness{Env: servertest.Attach(t, "http://"+reps[i].addr, "docker", model), t: t, model: model}
	h.Image = image
	return h
}

// replyText is the text of the reply to input in evs.
func replyText(evs []logEvent, inputID string) string {
	var b strings.Builder
	for _, e := range evs {
		if e.InputID == inputID && e.Type == "text-delta" {
			f := frames([]logEvent{e})
			b.WriteString(f[0]["delta"].(string))
		}
	}
	return b.String()
}

// checkOnceInOrder checks each input got exactly one reply, the replies
// came in the inputs' order, and each answers its own input.
func checkOnceInOrder(t *testing.T, evs []logEvent, rcs []receipt, contents []string) {
	t.Helper()
	ended := map[string]int{}
	var order []string
	for _, e := range evs {
		switch e.Type {
		case "turn.started":
			order = append(order, e.InputID)
		case "turn.ended":
			ended[e.InputID]++
		}
	}
	if len(order) != len(rcs) {
		t.Fatalf("%d replies started for %d inputs: %s", len(order), len(rcs), summarize(evs))
	}
	for i, rc := range rcs {
		if order[i] != rc.InputID || ended[rc.InputID] != 1 {
			t.Fatalf("input %d (%s): reply %d in order is %s, ended %d times", i, rc.InputID, i, order[i], ended[rc.InputID])
		}
		if got := replyText(evs, rc.InputID); got != "echo: "+contents[i] {
			var mine []string
			for _, e := range evs {
				if e.InputID == rc.InputID {
					mine = append(mine, e.Type+" "+string(e.Payload))
				}
			}
			t.Fatalf("input %d answered %q, want an echo of %q; its events:\n%s", i, got, contents[i], strings.Join(mine, "\n"))
		}
	}
}

// TestInputsThroughEveryReplica: inputs sent in quick succession to
// different replicas are delivered once each, in order.
func TestInputsThroughEveryReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reps := startReplicas(t, ctx, 3)
	image := servertest.DockerImage(t)
	model := echoModel(t, 30)
	hs := []*harness{on(t, reps, 0, model, image), on(t, reps, 1, model, image), on(t, reps, 2, model, image)}
	sid := hs[0].session(hs[0].agent("auto", nil))
	t.Cleanup(func() { hs[0].call("DELETE", "/api/v1/sessions/"+sid, nil, nil) })
	var rcs []receipt
	var contents []string
	for i := 0; i < 9; i++ {
		c := fmt.Sprintf("message %d via replica %d", i, i%3)
		contents = append(contents, c)
		rcs = append(rcs, hs[i%3].send(sid, c, fmt.Sprintf("m%d", i)))
	}
	evs := hs[2].events(sid, 0, untilTurnEnded(rcs[len(rcs)-1].InputID))
	checkGapFree(t, evs, 1)
	checkOnceInOrder(t, evs, rcs, contents)
}

// TestFrozenHolderIsFencedOut: the holder is stopped (SIGSTOP) mid-reply
// past its lease; another replica takes the Session over and completes
// the reply; when the old holder runs again (SIGCONT) its late writes are
// refused and the log is unchanged by it. A holder frozen between two
// statements of a transaction (an Append's fenced update of the stream's
// row and its commit, more likely the busier the machine) holds that
// row's lock until the database ends its idle transaction
// (postgres.IdleTransactionTimeout); the takeover waits for that, no
// longer.
func TestFrozenHolderIsFencedOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reps := startReplicas(t, ctx, 2)
	image := servertest.DockerImage(t)
	model := fakemodel.New(t, fakemodel.Call("shell", map[string]any{"command": "sleep 2; echo slept"}),
		fakemodel.Text("done after the sleep")).WithKey(servertest.ModelKey)
	a, b := on(t, reps, 0, model, image), on(t, reps, 1, model, image)
	sid := a.session(a.agent("auto", nil))
	t.Cleanup(func() { b.call("DELETE", "/api/v1/sessions/"+sid, nil, nil) })
	a.waitState(sid, "READY")
	rc := a.send(sid, "go", "")
	b.events(sid, 0, func(e logEvent) bool { return e.Type == "tool-input-available" })
	_ = reps[0].cmd.Process.Signal(syscall.SIGSTOP)
	resumed := false
	defer func() {
		if !resumed {
			_ = reps[0].cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	evs := b.events(sid, 0, untilTurnEnded(rc.InputID))
	checkGapFree(t, evs, 1)
	_ = reps[0].cmd.Process.Signal(syscall.SIGCONT)
	resumed = true
	// The old holder runs again: give it two lease periods to try to
	// write, then the log must be exactly what it was, plus nothing but
	// the new holder's own entries.
	time.Sleep(2 * sessionLease * time.Second)
	all := b.events(sid, 0, func(e logEvent) bool { return e.Seq >= evs[len(evs)-1].Seq })
	counts := map[string]int{}
	for _, f := range frames(all) {
		counts[f["type"].(string)]++
	}
	for typ, want := range map[string]int{"start": 1, "tool-output-available": 1, "finish": 1} {
		if counts[typ] != want {
			t.Errorf("%d %s frames after the frozen holder woke, want %d: %s", counts[typ], typ, want, summarize(all))
		}
	}
	if !strings.Contains(reps[0].log.String(), "lease lost") && !strings.Contains(reps[0].log.String(), "fenced") {
		t.Logf("(the woken holder logged no fencing; its runner may have stopped before writing)")
	}
	var sess map[string]any
	b.must(200, "GET", "/api/v1/sessions/"+sid, nil, &sess)
	if holder := sess["runtime"].(map[string]any)["holder"]; holder != "http://"+reps[1].addr {
		t.Fatalf("holder %v after the takeover, want replica B", holder)
	}
}

// TestRollingRestart: a ten-turn conversation while every replica is
// restarted in turn (SIGTERM, then started again): nothing is lost, each
// input is answered once, in order, and the log is gap-free.
func TestRollingRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reps := startReplicas(t, ctx, 3)
	image := servertest.DockerImage(t)
	model := echoModel(t, 30) // room for the agent's own retries of a model call cut by a handover
	hs := []*harness{on(t, reps, 0, model, image), on(t, reps, 1, model, image), on(t, reps, 2, model, image)}
	sid := hs[0].session(hs[0].agent("auto", nil))
	t.Cleanup(func() { hs[1].call("DELETE", "/api/v1/sessions/"+sid, nil, nil) })
	var rcs []receipt
	var contents []string
	for turn := 0; turn < 10; turn++ {
		restart := turn % 3
		via := (turn + 1) % 3 // a replica that stays up during this turn
		c := fmt.Sprintf("turn %d", turn)
		contents = append(contents, c)
		rcs = append(rcs, hs[via].send(sid, c, fmt.Sprintf("t%d", turn)))
		reps[restart].stop()
		reps[restart].start()
		hs[via].events(sid, 0, untilTurnEnded(rcs[turn].InputID))
	}
	evs := hs[0].events(sid, 0, untilTurnEnded(rcs[9].InputID))
	checkGapFree(t, evs, 1)
	checkOnceInOrder(t, evs, rcs, contents)
}

// TestRequestsThroughAnotherReplica: an answer and an interrupt sent to a
// replica that does not hold the Session reach its holder the way inputs
// do (recorded, then a wake-up), with no forwarding between replicas: the
// approved call runs, the held reply stops, and the holder stays the same.
func TestRequestsThroughAnotherReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reps := startReplicas(t, ctx, 2)
	image := servertest.DockerImage(t)
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	model := fakemodel.New(t,
		fakemodel.Call("shell", map[string]any{"command": "echo approved-on-the-holder"}),
		fakemodel.Text("ran it"),
		fakemodel.Text("this reply is held").HoldUntil(gate)).WithKey(servertest.ModelKey)
	onA, onB := on(t, reps, 0, model, image), on(t, reps, 1, model, image)
	sid := onA.session(onA.agent("ask", nil))
	t.Cleanup(func() { onB.call("DELETE", "/api/v1/sessions/"+sid, nil, nil) })
	holderA := func() { t.Helper(); onB.holderIs(sid, reps[0]) }

	rc := onA.send(sid, "run it", "")
	evs := onB.events(sid, 0, func(e logEvent) bool { return e.Type == "interaction.opened" && e.InputID == rc.InputID })
	var opened struct {
		Interaction struct {
			ID string `json:"interaction_id"`
		} `json:"interaction"`
	}
	_ = json.Unmarshal(evs[len(evs)-1].Payload, &opened)
	holderA()
	answer := map[string]any{"interaction_id": opened.Interaction.ID, "answer": map[string]any{"decision": "approve"}}
	onB.must(200, "POST", "/api/v1/sessions/"+sid+"/interaction-respond", answer, nil)
	other := map[string]any{"interaction_id": opened.Interaction.ID, "answer": map[string]any{"decision": "reject"}}
	onA.must(409, "POST", "/api/v1/sessions/"+sid+"/interaction-respond", other, nil) // answered once
	evs = onB.events(sid, rc.Seq, untilTurnEnded(rc.InputID))
	var output string
	for _, f := range frames(evs) {
		if f["type"] == "tool-output-available" {
			output = fmt.Sprint(f["output"])
		}
	}
	if !strings.Contains(output, "approved-on-the-holder") {
		t.Fatalf("the approved call's output %q; log %s", output, summarize(evs))
	}

	rc = onA.send(sid, "hold on", "")
	onB.events(sid, 0, func(e logEvent) bool { return e.Type == "text-delta" && e.InputID == rc.InputID })
	holderA()
	var res map[string]string
	onB.must(200, "POST", "/api/v1/sessions/"+sid+"/interrupt", nil, &res)
	if res["status"] != "accepted" {
		t.Fatalf("interrupt through replica B: %v", res)
	}
	evs = onB.events(sid, rc.Seq, untilTurnEnded(rc.InputID))
	var end map[string]any
	_ = json.Unmarshal(evs[len(evs)-1].Payload, &end)
	if end["outcome"] != "interrupted" {
		t.Fatalf("the held reply ended %v", end)
	}
	onB.waitState(sid, "READY")
	holderA()
}

// TestRollingRestartMidStream: every one of three replicas is restarted
// in turn (SIGTERM, then started again) while a reply streams: its holder
// lets it finish before it hands the Session over, so the reply completes
// whole and unbroken.
func TestRollingRestartMidStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reps := startReplicas(t, ctx, 3)
	image := servertest.DockerImage(t)
	model := fakemodel.New(t, fakemodel.Text(longAnswer).WithDelay(15*time.Millisecond), fakemodel.Text(longAnswer)).WithKey(servertest.ModelKey)
	hs := []*harness{on(t, reps, 0, model, image), on(t, reps, 1, model, image), on(t, reps, 2, model, image)}
	sid := hs[0].session(hs[0].agent("auto", nil))
	t.Cleanup(func() { hs[1].call("DELETE", "/api/v1/sessions/"+sid, nil, nil) })
	rc := hs[0].send(sid, "tell me", "")
	hs[1].waitDeltas(sid, 20)
	for i := range reps {
		reps[i].stop()
		reps[i].start()
	}
	evs := hs[2].events(sid, 0, untilTurnEnded(rc.InputID))
	if marks := checkWholeAnswer(t, evs, longAnswer); marks != 0 {
		t.Fatalf("%d data-step-broken marks: a graceful stop broke the reply", marks)
	}
	if n := len(model.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times, want once", n)
	}
}
