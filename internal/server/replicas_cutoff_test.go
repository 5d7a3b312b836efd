package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"

	"github.com/astrabox/astrabox/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
)

// dbRelay is a TCP relay between a replica and PostgreSQL that a test
// can cut. Cut, it forwards nothing either way but keeps every
// connection open, as a network partition looks from both ends: the
// replica's statements hang, the database sees idle clients. Restored,
// what waited in it flows on. Close ends every connection.
type dbRelay struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cutOff  bool
	resumed chan struct{} // closed by restore; a new one per cut
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// newDBRelay relays connections to target (host:port) until the test
// ends.
func newDBRelay(t *testing.T, target string) *dbRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &dbRelay{ln: ln, target: target, resumed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	r.wg.Go(r.accept)
	t.Cleanup(r.close)
	return r
}

// dsn returns dsn (a postgres:// URL) reaching its server through r.
func (r *dbRelay) dsn(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	u.Host = r.ln.Addr().String()
	return u.String()
}

func (r *dbRelay) accept() {
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", r.target)
		if err != nil {
			in.Close()
			continue
		}
		if !r.track(in, out) {
			return
		}
		r.wg.Go(func() { r.pipe(out, in) })
		r.wg.Go(func() { r.pipe(in, out) })
	}
}

// track records both ends for close; false once closed.
func (r *dbRelay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst, holding each read while the relay is cut;
// either side ending ends both.
func (r *dbRelay) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.hold()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold waits while the relay is cut.
func (r *dbRelay) hold() {
	r.mu.Lock()
	cut, resumed := r.cutOff, r.resumed
	r.mu.Unlock()
	if cut {
		<-resumed
	}
}

// cut stops relaying.
func (r *dbRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.cutOff {
		r.cutOff, r.resumed = true, make(chan struct{})
	}
}

// restore relays again, what waited first.
func (r *dbRelay) restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cutOff {
		r.cutOff = false
		close(r.resumed)
	}
}

func (r *dbRelay) close() {
	r.restore()
	r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}

// storeHealth is the store part of a replica's /readyz.
func storeHealth(p *serveProcess) (string, error) {
	var body struct {
		Store struct {
			Status string `json:"status"`
		} `json:"store"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+p.addr+"/readyz", nil)
	req.Header.Set(api.HeaderAPIKey, servertest.Key) // the detail is for authenticated callers
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.Store.Status, nil
}

// programsInBox counts the agent programs running in the session's box,
// through replica via.
func programsInBox(t *testing.T, ctx context.Context, via *serveProcess, sandboxID string) string {
	t.Helper()
	ex, err := client.New("http://"+via.addr, servertest.Key).Execd(ctx, sandboxID)
	if err != nil {
		t.Fatalf("execd of box %s: %v", sandboxID, err)
	}
	// [a]gent: the pattern does not match this shell's own command line.
	out, err := ex.Run(ctx, execdwire.RunCommandRequest{Command: `n=0; for f in /proc/[0-9]*/cmdline; do ` +
		`if tr '\0' ' ' <"$f" 2>/dev/null | grep -q '[a]gent --state'; then n=$((n+1)); fi; done; echo "$n"`})
	if err != nil {
		t.Fatalf("count programs in box %s: %v", sandboxID, err)
	}
	return strings.TrimSpace(string(out.Stdout))
}

// TestHolderCutOffFromDatabase: the holder of a Session keeps running but
// loses its database (its DSN points at a relay the test stops) mid-reply.
// Another replica takes the Session over while the old holder is still
// cut off, re-attaches to the running program, and the reply completes
// with a gap-free log and no frame lost or repeated; one program runs in
// the box. When the relay is restored, the old holder's late writes are
// refused by the lease epoch, it says so and stops its runner, the log is
// unchanged by it, and it starts no second program.
func TestHolderCutOffFromDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dsn := os.Getenv("ASTRABOX_TEST_POSTGRES")
	testenv.Need(t, dsn != "", "PostgreSQL (ASTRABOX_TEST_POSTGRES)")
	u, err := url.Parse(dsn)
	testenv.Need(t, err == nil && u.Host != "" && strings.HasPrefix(u.Scheme, "postgres"), "ASTRABOX_TEST_POSTGRES as a postgres:// URL with a host (to relay)")
	relay := newDBRelay(t, u.Host)
	reps := startReplicasVia(t, ctx, 2, func(i int, dsn string) string {
		if i == 0 {
			return relay.dsn(t, dsn)
		}
		return dsn
	})
	image := servertest.DockerImage(t)
	// The tool outlasts the takeover (two lease periods), so no model call
	// is in flight through the old holder's tunnel when it is replaced.
	model := fakemodel.New(t, fakemodel.Call("shell", map[string]any{"command": "sleep 10; echo slept"}),
		fakemodel.Text("done after the sleep")).WithKey(servertest.ModelKey)
	a, b := on(t, reps, 0, model, image), on(t, reps, 1, model, image)
	sid := a.session(a.agent("auto", nil))
	t.Cleanup(func() { b.call("DELETE", "/api/v1/sessions/"+sid, nil, nil) })
	a.waitState(sid, "READY")
	rc := b.send(sid, "go", "")
	b.events(sid, 0, func(e logEvent) bool { return e.Type == "tool-input-available" })
	var sess map[string]any
	b.must(200, "GET", "/api/v1/sessions/"+sid, nil, &sess)
	if holder := sess["runtime"].(map[string]any)["holder"]; holder != "http://"+reps[0].addr {
		t.Fatalf("holder %v, want replica A", holder)
	}
	sandboxID, _ := sess["sandbox_id"].(string)

	cut := time.Now()
	relay.cut()
	evs := b.events(sid, 0, untilTurnEnded(rc.InputID))
	t.Logf("the reply ended %v after its holder was cut off from the database", time.Since(cut).Round(time.Millisecond))
	checkGapFree(t, evs, 1)
	checkReplyOnce(t, evs)
	b.must(200, "GET", "/api/v1/sessions/"+sid, nil, &sess)
	if holder := sess["runtime"].(map[string]any)["holder"]; holder != "http://"+reps[1].addr {
		t.Fatalf("holder %v while A is cut off, want replica B", holder)
	}
	if status, err := storeHealth(reps[0]); err != nil || status == "healthy" {
		t.Fatalf("replica A's /readyz says its store is %q (%v) while its database is cut off", status, err)
	}
	if n := programsInBox(t, ctx, reps[1], sandboxID); n != "1" {
		t.Fatalf("%s agent programs in the box after the takeover, want 1", n)
	}

	relay.restore()
	// The old holder's runner, blocked on the database, runs on: its next
	// write (or lease renewal) is refused by the epoch, and it stops.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if line := stoppedRunner(reps[0].log.String(), sid); line != "" {
			t.Logf("replica A, after the relay was restored: %s", line)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica A never stopped its runner of %s after the relay was restored", sid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for status, err := storeHealth(reps[0]); status != "healthy"; status, err = storeHealth(reps[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("replica A's store is %q (%v) after the relay was restored", status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The whole log: what B wrote, and after the reply only B's own
	// entries (it settles the Session), none of A's.
	b.must(200, "GET", "/api/v1/sessions/"+sid, nil, &sess)
	head := int64(sess["last_seq"].(float64))
	all := b.events(sid, 0, func(e logEvent) bool { return e.Seq >= head })
	checkGapFree(t, all, 1)
	for i, e := range evs {
		if all[i].Type != e.Type || string(all[i].Payload) != string(e.Payload) {
			t.Fatalf("entry %d changed after the relay was restored: %s %s, was %s %s", e.Seq, all[i].Type, all[i].Payload, e.Type, e.Payload)
		}
	}
	if late := frames(all[len(evs):]); len(late) > 0 {
		t.Fatalf("%d frames after the reply ended: %v", len(late), late)
	}
	if n := programsInBox(t, ctx, reps[1], sandboxID); n != "1" {
		t.Fatalf("%s agent programs in the box after the old holder came back, want 1", n)
	}
	if holder := sess["runtime"].(map[string]any)["holder"]; holder != "http://"+reps[1].addr {
		t.Fatalf("holder %v after the relay was restored, want replica B", holder)
	}
}

// checkReplyOnce checks evs hold the reply of the test's script exactly
// once: one of each frame, and its whole text.
func checkReplyOnce(t *testing.T, evs []logEvent) {
	t.Helper()
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
			t.Errorf("%d %s frames, want %d: %v", counts[typ], typ, want, counts)
		}
	}
	if text.String() != "done after the sleep" {
		t.Fatalf("text %q", text.String())
	}
}

// stoppedRunner returns the line of a replica's log that says its runner
// of session sid stopped on a refused write ("" if none): a write or
// renewal fenced by the epoch, or one the database refused after ending
// the replica's idle transaction.
func stoppedRunner(log, sid string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "session_id="+sid) &&
			(strings.Contains(line, "lease lost") || strings.Contains(line, "session runner stopped")) {
			return line
		}
	}
	return ""
}
