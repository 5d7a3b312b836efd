package lifecycle

import (
	"context"
	"sync"

	"github.com/astrabox/astrabox/store"
)

// broker fans state events out to live subscribers (the events stream of
// the API). Slow subscribers lose events rather than block the service;
// they can re-read from the store by sequence.
type broker struct {
	mu   sync.Mutex
	subs map[string]map[chan store.Event]struct{}
}

func newBroker() *broker { return &broker{subs: map[string]map[chan store.Event]struct{}{}} }

// emit records rec's current state as an event and publishes it.
func (s *Service) emit(ctx context.Context, rec *store.Sandbox) {
	ev := store.Event{SandboxID: rec.ID, State: rec.State, Reason: rec.Reason, At: s.now().UTC()}
	seq, err := s.cfg.Store.AppendEvent(context.WithoutCancel(ctx), ev)
	if err != nil {
		s.log.Warn("record sandbox event", "sandbox_id", rec.ID, "err", err)
		return
	}
	ev.Seq = seq
	s.subs.publish(ev)
}

func (b *broker) publish(ev store.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs[ev.SandboxID] {
		select {
		case ch <- ev:
		default:
		}
	}
}

// Subscribe returns a channel of the events of sandbox id from now on, and
// a function that ends the subscription.
func (s *Service) Subscribe(id string) (<-chan store.Event, func()) {
	ch := make(chan store.Event, 64)
	b := s.subs
	b.mu.Lock()
	if b.subs[id] == nil {
		b.subs[id] = map[chan store.Event]struct{}{}
	}
	b.subs[id][ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.subs[id], ch)
		if len(b.subs[id]) == 0 {
			delete(b.subs, id)
		}
		b.mu.Unlock()
	}
}

// Events returns the recorded events of sandbox id after seq.
func (s *Service) Events(ctx context.Context, id string, afterSeq int64) ([]store.Event, error) {
	return s.cfg.Store.Events(ctx, id, afterSeq)
}
