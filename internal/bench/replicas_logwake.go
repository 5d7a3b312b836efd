package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/postgres"
	"github.com/astrabox/astrabox/store/streamlog"
)

// logPoll is the follower's poll of the log-layer rows: streamlog.Log's
// default, which the server uses.
const logPoll = time.Second

// measureLogWake measures, on database dsn, the time from an append
// committed through one store (a replica's pool) to its receipt by a
// follower of the same stream through another, n times each: woken by
// the PostgreSQL Notifier (LISTEN/NOTIFY, what replicas run), and, as
// the reference, with notifiers that reach no other process, so that
// only the follower's poll finds the entry (what a lost notification
// leaves). Each append waits a random part of the poll interval first,
// so the poll's phase is uniform.
func measureLogWake(ctx context.Context, dsn string, n int) (PlatformRow, error) {
	a, err := postgres.Open(ctx, dsn)
	if err != nil {
		return PlatformRow{}, err
	}
	defer a.Close()
	b, err := postgres.Open(ctx, dsn)
	if err != nil {
		return PlatformRow{}, err
	}
	defer b.Close()
	na, err := a.Notifier(ctx, discardLogger())
	if err != nil {
		return PlatformRow{}, err
	}
	defer na.Close()
	nb, err := b.Notifier(ctx, discardLogger())
	if err != nil {
		return PlatformRow{}, err
	}
	defer nb.Close()
	notified, err := logWake(ctx, &streamlog.Log{Store: a, Notifier: na}, &streamlog.Log{Store: b, Notifier: nb, Poll: logPoll}, "bench-wake-notify", n)
	if err != nil {
		return PlatformRow{}, fmt.Errorf("log wake with LISTEN/NOTIFY: %w", err)
	}
	polled, err := logWake(ctx, &streamlog.Log{Store: a, Notifier: streamlog.NewLocal()}, &streamlog.Log{Store: b, Notifier: streamlog.NewLocal(), Poll: logPoll},
		"bench-wake-poll", n)
	if err != nil {
		return PlatformRow{}, fmt.Errorf("log wake by polling: %w", err)
	}
	ref := seriesOf("poll fallback only", polled)
	return PlatformRow{Scenario: "log append via store A → follower via store B", Backend: "postgres",
		Subject: seriesOf("LISTEN/NOTIFY", notified), Reference: &ref,
		Note: fmt.Sprintf("streamlog.Log on two pools of one database, commit → receipt; the reference polls every %v and hears no "+
			"notification (serve has no setting for it: this is the fallback a lost notification leaves)", logPoll)}, nil
}

// logWake appends n entries to stream through w, one at a time, and
// returns for each the time from its commit to its receipt by a follower
// through f.
func logWake(ctx context.Context, w, f *streamlog.Log, name string, n int) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type receipt struct {
		seq int64
		at  time.Time
	}
	got := make(chan receipt, n)
	errc := make(chan error, 1)
	go func() {
		errc <- f.Follow(ctx, name, 0, func(e store.LogEntry) (bool, error) {
			got <- receipt{e.Seq, time.Now()}
			return e.Seq < int64(n), nil
		})
	}()
	var out []time.Duration
	for i := range n {
		time.Sleep(time.Duration(rand.N(int64(logPoll))))
		es, err := w.Append(ctx, name, 0, store.LogEntry{Type: "bench", Payload: []byte(`{}`)})
		if err != nil {
			return out, err
		}
		committed := time.Now()
		select {
		case r := <-got:
			if r.seq != es[0].Seq {
				return out, fmt.Errorf("append %d: follower received seq %d, want %d", i, r.seq, es[0].Seq)
			}
			out = append(out, max(r.at.Sub(committed), 0))
		case err := <-errc:
			if err == nil {
				err = errors.New("follower ended")
			}
			return out, err
		case <-time.After(30 * time.Second):
			return out, fmt.Errorf("append %d: not received within 30 s", i)
		}
	}
	return out, nil
}
