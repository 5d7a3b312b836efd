// Package streamlog is the durable per-stream log that the agent platform
// (Sessions' output) and the lifecycle service (sandbox state events)
// write and their readers follow: appends go to the store (gap-free seqs, fenced by a lease
// epoch) and then wake followers through a Notifier; a follower reads
// after its cursor, then waits for a notification or a poll tick (the
// safety net for notifications lost, e.g. on a database reconnect).
package streamlog

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/astrabox/astrabox/internal/metrics"
	"github.com/astrabox/astrabox/store"
)

// Notifier wakes followers of a stream. Notifications carry no data and
// may be lost or merged: a woken follower re-reads the store.
type Notifier interface {
	// Notify wakes the followers of stream (after an append committed).
	Notify(stream string)
	// Subscribe returns a channel that receives a value after each Notify
	// of stream (coalesced: at most one pending) and a cancel func that
	// must be called to release it.
	Subscribe(stream string) (<-chan struct{}, func())
}

// Local is the in-process Notifier (one server, SQLite).
type Local struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// NewLocal returns an in-process notifier.
func NewLocal() *Local { return &Local{subs: map[string]map[chan struct{}]struct{}{}} }

// Notify implements Notifier.
func (l *Local) Notify(stream string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.subs[stream] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Subscribe implements Notifier.
func (l *Local) Subscribe(stream string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	if l.subs[stream] == nil {
		l.subs[stream] = map[chan struct{}]struct{}{}
	}
	l.subs[stream][ch] = struct{}{}
	l.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.subs[stream], ch)
			if len(l.subs[stream]) == 0 {
				delete(l.subs, stream)
			}
		})
	}
}

// Log is the durable log over a store and a notifier.
type Log struct {
	Store    store.Streams
	Notifier Notifier
	// Poll is the follower's safety-net interval (default 1 s).
	Poll time.Duration
}

// Append appends entries (fenced by epoch > 0; see store.Streams.Append),
// wakes the stream's followers, and returns the entries with their seqs.
func (l *Log) Append(ctx context.Context, stream string, epoch int64, entries ...store.LogEntry) ([]store.LogEntry, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	first, err := l.Store.Append(ctx, stream, epoch, entries)
	if err != nil {
		metrics.LogAppends.Inc("error")
		return nil, fmt.Errorf("append to %s: %w", stream, err)
	}
	metrics.LogAppends.Inc("ok")
	metrics.LogEntries.Add(float64(len(entries)))
	out := make([]store.LogEntry, len(entries))
	for i, e := range entries {
		e.Seq = first + int64(i)
		out[i] = e
	}
	l.Notifier.Notify(stream)
	return out, nil
}

// Follow calls fn for every entry with Seq > afterSeq, in order, waiting
// for new ones, until fn returns false or an error, or ctx ends (then it
// returns ctx.Err()). A false from fn ends Follow with nil.
func (l *Log) Follow(ctx context.Context, stream string, afterSeq int64, fn func(store.LogEntry) (bool, error)) error {
	wake, cancel := l.Notifier.Subscribe(stream)
	defer cancel()
	poll := l.Poll
	if poll <= 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		entries, err := l.Store.ReadStream(ctx, stream, afterSeq, 512)
		if err != nil {
			return fmt.Errorf("read %s: %w", stream, err)
		}
		for _, e := range entries {
			more, err := fn(e)
			if err != nil || !more {
				return err
			}
			afterSeq = e.Seq
		}
		if len(entries) == 512 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-tick.C:
		}
	}
}
