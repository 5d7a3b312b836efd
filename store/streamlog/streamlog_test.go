package streamlog_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/store/streamlog"
	"github.com/astrabox/astrabox/store/streamlog/notifiertest"
)

func open(t *testing.T) *streamlog.Log {
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &streamlog.Log{Store: st, Notifier: streamlog.NewLocal(), Poll: time.Hour}
}

func entry(i int) store.LogEntry {
	b, _ := json.Marshal(map[string]int{"i": i})
	return store.LogEntry{Type: "text-delta", Payload: b}
}

// TestFollowSeesEveryAppendOnce: followers started before, during and
// after a burst of appends see every entry once, in order, woken by the
// notifier (the poll is an hour, so a missed notification would hang).
func TestFollowSeesEveryAppendOnce(t *testing.T) {
	l := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const total = 300
	var wg sync.WaitGroup
	follow := func(after int64) {
		defer wg.Done()
		next := after + 1
		err := l.Follow(ctx, "s1", after, func(e store.LogEntry) (bool, error) {
			if e.Seq != next {
				t.Errorf("follower after %d got seq %d, want %d", after, e.Seq, next)
			}
			next++
			return e.Seq < total, nil
		})
		if err != nil {
			t.Errorf("follow: %v", err)
		}
	}
	wg.Add(1)
	go follow(0)
	for i := 0; i < total; i += 3 {
		if _, err := l.Append(ctx, "s1", 0, entry(i), entry(i+1), entry(i+2)); err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			wg.Add(2)
			go follow(0)
			go follow(100)
		}
	}
	wg.Add(1)
	go follow(total - 1)
	wg.Wait()
}

// TestLocalNotifier runs the notifier suite on the in-process notifier
// (one server: both "replicas" are the same notifier).
func TestLocalNotifier(t *testing.T) {
	notifiertest.Run(t, func(*testing.T) (streamlog.Notifier, streamlog.Notifier) {
		n := streamlog.NewLocal()
		return n, n
	})
}
