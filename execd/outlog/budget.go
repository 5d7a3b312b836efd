package outlog

import (
	"slices"
	"sync"
)

// Budget bounds the bytes that a set of Logs retain together: the output
// of every command of one box, which per-stream limits alone leave at the
// limit times the number of commands. When the set is over its limit, the
// output of finished logs goes first, oldest finished first, whole; then,
// if that is not enough, the oldest bytes of the log being written. Bytes
// an attached Follower has not read are never dropped (Write waits for
// the Follower instead, as with a stream's own limit), so the limit may be
// passed by what live readers hold. Dropped bytes are counted per log
// (Log.Dropped) and readers learn of them as of any trimmed bytes
// (Result.Lost). The zero value is not usable; call NewBudget.
type Budget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	// finished are closed logs still holding bytes, oldest first.
	finished []*Log
}

// NewBudget returns a budget of limit bytes (chunk overhead included).
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Used returns the bytes the budget's logs hold now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// NewIn is New for a log whose bytes count against b (nil: none).
func NewIn(b *Budget, limit int64) *Log {
	l := New(limit)
	l.budget = b
	return l
}

// settle brings l's cost into the budget after a write and, while the
// budget is over its limit, frees finished logs and then l's oldest bytes.
// Lock order: the budget's, then a log's.
func (b *Budget) settle(l *Log) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cost := l.cost()
	b.used += cost - l.charged
	l.charged = cost
	for b.used > b.limit && len(b.finished) > 0 {
		f := b.finished[0]
		b.finished = b.finished[1:]
		freed := f.release()
		f.charged -= freed
		b.used -= freed
	}
	if b.used > b.limit {
		freed := l.shrink(b.used - b.limit)
		l.charged -= freed
		b.used -= freed
	}
}

// finish queues a closed log's bytes to be freed first when room is needed.
func (b *Budget) finish(l *Log) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l.charged > 0 && !slices.Contains(b.finished, l) {
		b.finished = append(b.finished, l)
	}
}

// Forget takes l out of the budget (its record is gone): what it holds no
// longer counts.
func (b *Budget) Forget(l *Log) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= l.charged
	l.charged = 0
	if i := slices.Index(b.finished, l); i >= 0 {
		b.finished = slices.Delete(b.finished, i, i+1)
	}
}

// cost is what l holds, chunk overhead included.
func (l *Log) cost() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.streams[Stdout].cost + l.streams[Stderr].cost
}

// release drops every retained byte of a closed log and returns the cost
// freed.
func (l *Log) release() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var freed int64
	for s := Stdout; s <= Stderr; s++ {
		sb := &l.streams[s]
		for _, c := range sb.chunks {
			l.dropped += int64(len(c.data))
		}
		freed += sb.cost
		*sb = streamBuf{}
	}
	return freed
}

// shrink drops l's oldest chunks, of either stream, until n of cost is
// freed, keeping each stream's newest chunk and every byte an attached
// Follower has not read; it returns the cost freed.
func (l *Log) shrink(n int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	minPos := l.minFollowerPos()
	var freed int64
	for freed < n {
		var pick *streamBuf
		for s := Stdout; s <= Stderr; s++ {
			sb := &l.streams[s]
			if len(sb.chunks) > 1 && sb.chunks[0].end() <= minPos && (pick == nil || sb.chunks[0].off < pick.chunks[0].off) {
				pick = sb
			}
		}
		if pick == nil {
			break
		}
		c := pick.chunks[0]
		cost := int64(cap(c.data)) + chunkOverhead
		pick.cost -= cost
		freed += cost
		l.dropped += int64(len(c.data))
		pick.chunks[0] = chunk{}
		pick.chunks = pick.chunks[1:]
	}
	return freed
}

// Dropped returns how many bytes the log no longer holds: dropped by its
// own per-stream limit or by its Budget.
func (l *Log) Dropped() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}
