package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// EventLog is the durable per-stream log a Service records state events
// on (Config.EventLog): store/streamlog's *Log satisfies it. Its entries must land in the
// Service's store (Events reads them back from there), and across replicas
// its Append must wake the followers of every replica (a notifier that
// reaches them all), so that a transition made by one replica reaches the
// events streams served by the others.
type EventLog interface {
	// Append appends entries to stream (unfenced when epoch is 0) with the
	// stream's next gap-free seqs, wakes the stream's followers and
	// returns the entries with their seqs.
	Append(ctx context.Context, stream string, epoch int64, entries ...store.LogEntry) ([]store.LogEntry, error)
	// Follow calls fn for every entry with Seq > afterSeq, in order,
	// waiting for new ones, until fn returns false (Follow returns nil) or
	// an error (returned), or ctx ends (ctx.Err()).
	Follow(ctx context.Context, stream string, afterSeq int64, fn func(store.LogEntry) (bool, error)) error
}

// EventStream names the durable stream of sandbox id's state events. Its
// seqs are the sandbox's own: 1, 2, 3, ... without gaps.
func EventStream(id string) string { return store.SandboxStreamPrefix + id }

// stateEntryType is the Type of a state event's log entry.
const stateEntryType = "sandbox.state"

// stateEntry is the payload of a state event's log entry; the sandbox is
// named by the stream, the seq and time by the entry.
type stateEntry struct {
	State  sandbox.State `json:"state"`
	Reason string        `json:"reason,omitempty"`
}

// encodeEvent returns the log entry recording ev.
func encodeEvent(ev store.Event) (store.LogEntry, error) {
	b, err := json.Marshal(stateEntry{State: ev.State, Reason: ev.Reason})
	if err != nil {
		return store.LogEntry{}, fmt.Errorf("encode state event: %w", err)
	}
	return store.LogEntry{Type: stateEntryType, Payload: b, At: ev.At}, nil
}

// decodeEvent returns the state event entry e of sandbox id's stream
// records; ok is false for an entry of another type (which readers skip).
func decodeEvent(id string, e store.LogEntry) (ev store.Event, ok bool, err error) {
	if e.Type != stateEntryType {
		return store.Event{}, false, nil
	}
	var p stateEntry
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return store.Event{}, false, fmt.Errorf("decode state event %d of sandbox %s: %w", e.Seq, id, err)
	}
	return store.Event{Seq: e.Seq, SandboxID: id, State: p.State, Reason: p.Reason, At: e.At}, true, nil
}
