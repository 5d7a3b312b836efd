package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/streamlog"
)

// eventsOf renders events as "seq:state".
func eventsOf(evs []store.Event) string {
	var b []string
	for _, e := range evs {
		b = append(b, fmt.Sprintf("%d:%s", e.Seq, e.State))
	}
	return strings.Join(b, ",")
}

// TestEventsOnTheDurableLog: replica a records state events on a log whose
// notifier replica b's follower shares; b's follower sees them live (its
// poll never fires), each sandbox's seqs are its own and gap-free, and the
// recorded events resume from any seq.
func TestEventsOnTheDurableLog(t *testing.T) {
	var log *streamlog.Log
	a, b, _ := replicasOn(t, func(s store.Store) EventLog {
		log = &streamlog.Log{Store: s, Notifier: streamlog.NewLocal(), Poll: time.Hour}
		return log
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	followed := make(chan []store.Event, 1)
	started := make(chan struct{})
	go func() {
		var got []store.Event
		err := b.FollowEvents(ctx, "box1", 0, func(e store.Event) (bool, error) {
			got = append(got, e)
			if e.State == sandbox.StatePending {
				close(started)
			}
			return !e.State.Terminal(), nil
		})
		if err != nil {
			t.Errorf("follow: %v", err)
		}
		followed <- got
	}()
	emit := func(id string, state sandbox.State, reason string) {
		a.emit(ctx, &store.Sandbox{ID: id, State: state, Reason: reason})
	}
	emit("box1", sandbox.StatePending, "")
	<-started // the rest reach the follower live
	emit("box2", sandbox.StatePending, "")
	emit("box1", sandbox.StateRunning, "")
	// An entry of a type the service does not write is skipped by readers.
	if _, err := log.Append(ctx, EventStream("box1"), 0, store.LogEntry{Type: "sandbox.other", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	emit("box1", sandbox.StateStopping, "user_delete")
	emit("box1", sandbox.StateTerminated, "user_delete")

	got := <-followed
	if want := "1:Pending,2:Running,4:Stopping,5:Terminated"; eventsOf(got) != want {
		t.Fatalf("followed %s, want %s", eventsOf(got), want)
	}
	if got[2].SandboxID != "box1" || got[2].Reason != "user_delete" || got[2].At.IsZero() {
		t.Fatalf("event %+v", got[2])
	}
	tests := []struct {
		id    string
		after int64
		want  string
	}{
		{"box1", 0, "1:Pending,2:Running,4:Stopping,5:Terminated"},
		{"box1", 2, "4:Stopping,5:Terminated"},
		{"box1", 5, ""},
		{"box2", 0, "1:Pending"},
		{"unknown", 0, ""},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s after %d", tc.id, tc.after), func(t *testing.T) {
			evs, err := b.Events(ctx, tc.id, tc.after)
			if err != nil || eventsOf(evs) != tc.want {
				t.Fatalf("Events = %s %v, want %s", eventsOf(evs), err, tc.want)
			}
		})
	}
}

// TestEventsDefaultLog: a service given no log records its events on the
// store all the same, where another service reads them.
func TestEventsDefaultLog(t *testing.T) {
	a, b, _ := replicas(t)
	ctx := context.Background()
	a.emit(ctx, &store.Sandbox{ID: "box", State: sandbox.StateRunning})
	a.emit(ctx, &store.Sandbox{ID: "box", State: sandbox.StateFailed, Reason: "gone"})
	evs, err := b.Events(ctx, "box", 0)
	if err != nil || eventsOf(evs) != "1:Running,2:Failed" || evs[1].Reason != "gone" {
		t.Fatalf("Events = %+v %v", evs, err)
	}
	var followed []store.Event
	if err := b.FollowEvents(ctx, "box", 1, func(e store.Event) (bool, error) {
		followed = append(followed, e)
		return !e.State.Terminal(), nil
	}); err != nil || eventsOf(followed) != "2:Failed" {
		t.Fatalf("FollowEvents = %s %v", eventsOf(followed), err)
	}
}

// TestForgetEvents: the events of a sandbox deleted longer ago than the
// retention are forgotten; a live sandbox's and a recently deleted one's
// are kept.
func TestForgetEvents(t *testing.T) {
	svc := newTestService(t, nil, 0)
	ctx := context.Background()
	now := time.Now()
	svc.now = func() time.Time { return now }
	svc.cfg.EventRetention = time.Hour
	if err := svc.cfg.Store.CreateSandbox(ctx, &store.Sandbox{ID: "live", Backend: "process", State: sandbox.StateRunning,
		CreatedAt: now, UpdatedAt: now, LastActiveAt: now}); err != nil {
		t.Fatal(err)
	}
	svc.emit(ctx, &store.Sandbox{ID: "live", State: sandbox.StateRunning})
	svc.emit(ctx, &store.Sandbox{ID: "gone", State: sandbox.StateTerminated}) // no record: deleted
	if n, err := svc.ForgetEvents(ctx); err != nil || n != 0 {
		t.Fatalf("within the retention: %d forgotten, %v", n, err)
	}
	now = now.Add(2 * time.Hour)
	if n, err := svc.ForgetEvents(ctx); err != nil || n != 1 {
		t.Fatalf("past the retention: %d forgotten, %v; want 1", n, err)
	}
	for id, want := range map[string]int{"live": 1, "gone": 0} {
		if evs, err := svc.Events(ctx, id, 0); err != nil || len(evs) != want {
			t.Errorf("events of %s: %v, %v; want %d", id, evs, err, want)
		}
	}
}
