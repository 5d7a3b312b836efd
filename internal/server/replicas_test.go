package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/store/postgres"
)

// reconcileEvery is the replicas' reconcile interval in seconds; an
// instance's reconciliation lease lasts three.
const reconcileEvery = 1

type replicaBox struct {
	id, backend string
	via         int // the replica that created it
}

// TestReplicasShareOneEngine: three `astrabox serve` replicas on one
// PostgreSQL database share one Docker engine, each with a native backend
// of its own. Boxes made through any replica stay Running, commands reach
// every box through every replica (another host's native boxes through
// the replica serving them), exactly one replica reconciles the shared
// engine, and when it is killed another takes over within a lease period
// with no box lost or wrongly reaped; restarted, it re-attaches.
func TestReplicasShareOneEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reps := startReplicas(t, ctx, 3)
	image := servertest.DockerImage(t)
	c := func(i int) *client.Client { return client.New("http://"+reps[i].addr, servertest.Key) }

	// Two boxes through each replica: one on the shared engine, one on
	// its own host's native backend.
	var boxes []replicaBox
	for i := range reps {
		for _, backend := range []string{"docker", "native"} {
			req := wire.CreateSandboxRequest{Entrypoint: []string{"sleep", "infinity"}, Backend: backend}
			if backend == "docker" {
				req.Image = &wire.ImageSpec{URI: image}
			}
			sb, err := c(i).Create(ctx, req, client.CreateOptions{})
			if err != nil {
				t.Fatalf("create %s box through replica %d: %v", backend, i, err)
			}
			boxes = append(boxes, replicaBox{sb.ID, backend, i})
		}
	}
	t.Cleanup(func() {
		for _, b := range boxes {
			_ = c(b.via).Delete(context.Background(), b.id)
		}
	})

	// They stay Running for five reconcile periods, seen from every replica.
	observe := time.Now().Add(5 * reconcileEvery * time.Second)
	for time.Now().Before(observe) {
		checkRunning(t, ctx, c, boxes, []int{0, 1, 2})
		time.Sleep(200 * time.Millisecond)
	}
	// Commands reach every box through every replica.
	for i := range reps {
		for _, b := range boxes {
			runThrough(t, ctx, c(i), b, fmt.Sprintf("from replica %d", i))
		}
	}
	// Exactly one replica reconciles the shared engine.
	holder := engineReconciler(t, reps, []int{0, 1, 2})

	// kill -9 of it: another takes the engine over within a lease period
	// (three reconcile intervals) and the next pass.
	killed := time.Now()
	reps[holder].kill9()
	var alive []int
	for i := range reps {
		if i != holder {
			alive = append(alive, i)
		}
	}
	deadline := time.Now().Add(time.Duration(3*reconcileEvery+2*reconcileEvery) * time.Second)
	var next int
	for {
		if n, ok := tryEngineReconciler(reps, alive); ok {
			next = n
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica took the engine over within %v of the kill", time.Since(killed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("replica %d took the shared engine over %v after replica %d was killed", next, time.Since(killed).Round(time.Millisecond), holder)
	// No box is lost or reaped: the dead replica's docker boxes are served
	// by the others; its native boxes are its host's, left alone.
	observe = time.Now().Add(3 * reconcileEvery * time.Second)
	for time.Now().Before(observe) {
		checkRunning(t, ctx, c, boxes, alive)
		time.Sleep(200 * time.Millisecond)
	}
	for _, i := range alive {
		for _, b := range boxes {
			if b.backend == "docker" || b.via != holder {
				runThrough(t, ctx, c(i), b, fmt.Sprintf("from replica %d after the kill", i))
			}
		}
	}
	// Restarted on its data dir, the dead replica re-attaches to its boxes.
	reps[holder].start()
	for _, b := range boxes {
		runThrough(t, ctx, c(holder), b, "after the restart")
	}
}

// checkRunning fails unless every box is Running as every replica in
// from sees it.
func checkRunning(t *testing.T, ctx context.Context, c func(int) *client.Client, boxes []replicaBox, from []int) {
	t.Helper()
	for _, i := range from {
		for _, b := range boxes {
			sb, err := c(i).Get(ctx, b.id)
			if err != nil {
				t.Fatalf("replica %d: get %s box %s: %v", i, b.backend, b.id, err)
			}
			if sb.Status.State != "Running" {
				t.Fatalf("replica %d: %s box %s (made through replica %d) is %s: %s", i, b.backend, b.id, b.via, sb.Status.State, sb.Status.Reason)
			}
		}
	}
}

func runThrough(t *testing.T, ctx context.Context, c *client.Client, b replicaBox, what string) {
	t.Helper()
	ex, err := c.Execd(ctx, b.id)
	if err != nil {
		t.Fatalf("%s: execd of %s box %s: %v", what, b.backend, b.id, err)
	}
	out, err := ex.Run(ctx, execdwire.RunCommandRequest{Command: "echo reached " + b.id})
	if err != nil || !strings.Contains(string(out.Stdout), "reached "+b.id) {
		t.Fatalf("%s: command in %s box %s (made through replica %d): %q, %v", what, b.backend, b.id, b.via, out.Stdout, err)
	}
}

// readiness is the part of /readyz about backend instances.
type readiness struct {
	Instances map[string]struct {
		Instance    string `json:"instance"`
		Reconciling bool   `json:"reconciling"`
	} `json:"instances"`
}

func ready(p *serveProcess) (readiness, error) {
	var r readiness
	req, _ := http.NewRequest("GET", "http://"+p.addr+"/readyz", nil)
	req.Header.Set(api.HeaderAPIKey, servertest.Key) // the detail is for authenticated callers
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// tryEngineReconciler returns the one replica of among reconciling the
// shared engine, false when none or several do, or they name different
// engine instances.
func tryEngineReconciler(reps []*serveProcess, among []int) (int, bool) {
	holder, n, name := -1, 0, ""
	for _, i := range among {
		r, err := ready(reps[i])
		if err != nil {
			return -1, false
		}
		d := r.Instances["docker"]
		if name != "" && d.Instance != name {
			return -1, false
		}
		name = d.Instance
		if d.Reconciling {
			holder, n = i, n+1
		}
	}
	return holder, n == 1
}

func engineReconciler(t *testing.T, reps []*serveProcess, among []int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if h, ok := tryEngineReconciler(reps, among); ok {
			return h
		}
		if time.Now().After(deadline) {
			for _, i := range among {
				r, err := ready(reps[i])
				t.Logf("replica %d: %+v %v", i, r, err)
			}
			t.Fatal("not exactly one replica reconciles the shared engine")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startReplicas starts n `astrabox serve` replicas on one fresh
// PostgreSQL database sharing the Docker engine (and the API key, master
// key and Docker owner), with short reconcile and Session lease periods.
func startReplicas(t *testing.T, ctx context.Context, n int) []*serveProcess {
	t.Helper()
	return startReplicasVia(t, ctx, n, nil)
}

// startReplicasVia is startReplicas with the DSN replica i is given
// passed through via(i, dsn) first (nil: every replica gets the scratch
// database's own), so that a test can route one replica's database
// traffic through a relay it controls.
func startReplicasVia(t *testing.T, ctx context.Context, n int, via func(i int, dsn string) string) []*serveProcess {
	t.Helper()
	testenv.NeedRoot(t)
	testenv.NeedDocker(t)
	dsn := os.Getenv("ASTRABOX_TEST_POSTGRES")
	testenv.Need(t, dsn != "", "PostgreSQL (ASTRABOX_TEST_POSTGRES)")
	scratch, drop, err := postgres.CreateScratch(ctx, dsn, "astrabox_replicas_")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	var mk, own [16]byte
	_, _ = rand.Read(mk[:])
	_, _ = rand.Read(own[:])
	masterKey := hex.EncodeToString(append(mk[:], mk[:]...)) + "\n"
	cfg, _ := json.Marshal(map[string]any{"docker": map[string]any{"owner": "astrabox-replicas-" + hex.EncodeToString(own[:4])},
		"replicas": map[string]any{"reconcileInterval": reconcileEvery, "sessionLease": sessionLease}})
	var reps []*serveProcess
	for i := 0; i < n; i++ {
		dsn := scratch
		if via != nil {
			dsn = via(i, dsn)
		}
		p := newServeProcess(t, "--database", dsn, "--backends", "native,docker")
		cfgFile := filepath.Join(p.dataDir, "config.json")
		if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.dataDir, "master.key"), []byte(masterKey), 0o600); err != nil {
			t.Fatal(err)
		}
		p.args = append(p.args, "--config", cfgFile, "--public-host", p.addr)
		p.start()
		reps = append(reps, p)
	}
	return reps
}

// sessionLease is the replicas' Session lease in seconds.
const sessionLease = 3

// TestSessionTakeover: a reply runs on replica A while the client sent
// the input and follows on replica B; `kill -9` of A mid-reply: B takes
// the Session over once A's lease expires, re-attaches to the running
// program by byte offset, and the reply completes with a gap-free log and
// no frame lost or repeated, as B's follower sees it.
func TestSessionTakeover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reps := startReplicas(t, ctx, 2)
	image := servertest.DockerImage(t)
	model := fakemodel.New(t, fakemodel.Call("shell", map[string]any{"command": "sleep 3; echo slept"}),
		fakemodel.Text("done after the sleep")).WithKey(servertest.ModelKey)
	onA := &harness{Env: servertest.Attach(t, "http://"+reps[0].addr, "docker", model), t: t, model: model}
	onA.Image = image
	onB := &harness{Env: servertest.Attach(t, "http://"+reps[1].addr, "docker", model), t: t, model: model}
	sid := onA.session(onA.agent("auto", nil))
	t.Cleanup(func() { onB.call("DELETE", "/api/v1/sessions/"+sid, nil, nil) })
	onA.waitState(sid, "READY") // the runtime is built on A, which opened the conversation
	rc := onB.send(sid, "go", "")
	onB.events(sid, 0, func(e logEvent) bool { return e.Type == "tool-input-available" })
	onB.holderIs(sid, reps[0])
	killed := time.Now()
	reps[0].kill9()
	evs := onB.events(sid, 0, untilTurnEnded(rc.InputID))
	t.Logf("the reply ended %v after its holder was killed", time.Since(killed).Round(time.Millisecond))
	checkGapFree(t, evs, 1)
	counts := map[string]int{}
	var text strings.Builder
	for _, f := range frames(evs) {
		counts[f["type"].(string)]++
		if f["type"] == "text-delta" {
			text.WriteString(f["delta"].(string))
		}
	}
	for typ, want := range map[string]int{"start": 1, "tool-input-available": 1, "tool-output-available": 1, "finish": 1} {
		if counts[typ] != want {
			t.Errorf("%d %s frames across the takeover, want %d: %v", counts[typ], typ, want, counts)
		}
	}
	if text.String() != "done after the sleep" {
		t.Fatalf("text %q", text.String())
	}
	onB.waitState(sid, "READY")
	onB.holderIs(sid, reps[1])
}

// holderIs fails the test unless replica p holds Session sid's runtime.
func (h *harness) holderIs(sid string, p *serveProcess) {
	h.t.Helper()
	var sess map[string]any
	h.must(200, "GET", "/api/v1/sessions/"+sid, nil, &sess)
	if holder := sess["runtime"].(map[string]any)["holder"]; holder != "http://"+p.addr {
		h.t.Fatalf("holder %v, want %s", holder, p.addr)
	}
}

// TestTakeoverMidStream: of three replicas, the one holding a Session is
// killed (-9) while the model's answer streams; another takes the Session
// over, the built-in agent makes the broken model call again through the
// new holder's model path, and the reply completes whole.
func TestTakeoverMidStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reps := startReplicas(t, ctx, 3)
	image := servertest.DockerImage(t)
	model := fakemodel.New(t, fakemodel.Text(longAnswer).WithDelay(15*time.Millisecond), fakemodel.Text(longAnswer)).WithKey(servertest.ModelKey)
	onA, onB := on(t, reps, 0, model, image), on(t, reps, 1, model, image)
	sid := onA.session(onA.agent("auto", nil))
	t.Cleanup(func() { onB.call("DELETE", "/api/v1/sessions/"+sid, nil, nil) })
	rc := onA.send(sid, "tell me", "")
	onB.waitDeltas(sid, 20)
	onB.holderIs(sid, reps[0])
	killed := time.Now()
	reps[0].kill9()
	evs := onB.events(sid, 0, untilTurnEnded(rc.InputID))
	t.Logf("the reply ended %v after its holder was killed", time.Since(killed).Round(time.Millisecond))
	if checkWholeAnswer(t, evs, longAnswer) == 0 {
		t.Fatal("no data-step-broken mark where the answer started again")
	}
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times, want 2 (the broken call and its retry)", n)
	}
}
