// Package outlog keeps a process's output in a bounded, offset-addressed log.
//
// A Log holds the bytes written to it by one or more streams (stdout and
// stderr) in arrival order. Every byte has a combined offset: the number of
// bytes, of all streams, written before it. Each stream's retained bytes are
// bounded; when a stream is over its budget its oldest bytes are dropped, so
// a reader that asks for an offset no longer retained learns how many bytes
// it lost. Readers never block writers: reads return shared, immutable
// slices, and Changed lets a reader wait for more without polling.
package outlog

import "sync"

// Stream identifies the source of bytes in a Log.
type Stream uint8

const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "unknown"
}

// chunkOverhead is what a chunk costs on top of its bytes, so that a flood
// of tiny interleaved writes is bounded too.
const chunkOverhead = 64

// maxCoalesce is the size up to which consecutive writes of one stream share
// a chunk.
const maxCoalesce = 64 << 10

type chunk struct {
	off  int64 // combined offset of data[0]
	data []byte
}

func (c chunk) end() int64 { return c.off + int64(len(c.data)) }

type streamBuf struct {
	chunks []chunk
	cost   int64
}

// Piece is a run of retained bytes of one stream, starting at Offset.
// Data must not be modified.
type Piece struct {
	Stream Stream
	Offset int64
	Data   []byte
}

// Log is a bounded output log. The zero value is not usable; call New.
// All methods are safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	limit   int64
	end     int64
	streams [3]streamBuf // indexed by Stream
	closed  bool
	changed chan struct{}
	// followers holds the positions of attached Followers; room is
	// signalled when one advances or detaches.
	followers map[*Follower]int64
	room      *sync.Cond
	// budget, when set, bounds this log with others (see Budget); charged
	// is the cost it has counted there, guarded by the budget's lock.
	budget  *Budget
	charged int64
	// dropped counts bytes no longer held (Dropped).
	dropped int64
}

// minLimit is the smallest per-stream budget: room for a few reads.
const minLimit = 256 << 10

// New returns a Log that retains at most limit bytes (plus per-chunk
// overhead) of each stream. limit <= 0 means 8 MiB; limits below 256 KiB
// are raised to it.
func New(limit int64) *Log {
	if limit <= 0 {
		limit = 8 << 20
	}
	limit = max(limit, minLimit)
	l := &Log{limit: limit, changed: make(chan struct{}), followers: make(map[*Follower]int64)}
	l.room = sync.NewCond(&l.mu)
	return l
}

// Write appends a copy of p to stream s. Writes after Close are dropped.
// While a Follower is attached, Write waits until storing p would drop no
// byte that Follower has yet to read. A log in a Budget then settles with
// it (which may free other logs' bytes, or this one's oldest).
func (l *Log) Write(s Stream, p []byte) {
	if len(p) == 0 || (s != Stdout && s != Stderr) {
		return
	}
	l.write(s, p)
	if l.budget != nil {
		l.budget.settle(l)
	}
}

func (l *Log) write(s Stream, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sb := &l.streams[s]
	for !l.closed && l.wouldDropUnread(sb, len(p)) {
		l.room.Wait()
	}
	if l.closed {
		return
	}
	if n := len(sb.chunks); n > 0 {
		last := &sb.chunks[n-1]
		if last.end() == l.end && len(last.data)+len(p) <= maxCoalesce {
			before := cap(last.data)
			last.data = append(last.data, p...)
			sb.cost += int64(len(p)) + int64(cap(last.data)-before-len(p))
			l.end += int64(len(p))
			l.trim(sb)
			l.wake()
			return
		}
	}
	data := make([]byte, len(p))
	copy(data, p)
	sb.chunks = append(sb.chunks, chunk{off: l.end, data: data})
	sb.cost += int64(cap(data)) + chunkOverhead
	l.end += int64(len(p))
	l.trim(sb)
	l.wake()
}

// trim drops the oldest chunks of sb while it is over budget, always keeping
// the newest chunk (a single write larger than the budget keeps its tail).
// It never drops bytes an attached Follower has not read: Write's wait
// keeps that overshoot small.
func (l *Log) trim(sb *streamBuf) {
	minPos := l.minFollowerPos()
	for sb.cost > l.limit && len(sb.chunks) > 1 && sb.chunks[0].end() <= minPos {
		c := sb.chunks[0]
		l.dropped += int64(len(c.data))
		sb.cost -= int64(cap(c.data)) + chunkOverhead
		sb.chunks[0] = chunk{}
		sb.chunks = sb.chunks[1:]
	}
	if sb.cost > l.limit && len(sb.chunks) == 1 {
		c := &sb.chunks[0]
		drop := min(int64(len(c.data))-l.limit, minPos-c.off)
		if drop > 0 {
			l.dropped += drop
			kept := make([]byte, int64(len(c.data))-drop)
			copy(kept, c.data[drop:])
			c.off += drop
			c.data = kept
			sb.cost = int64(len(kept)) + chunkOverhead
		}
	}
}

// wouldDropUnread reports whether appending n bytes to sb would evict a
// chunk that an attached Follower has not read.
func (l *Log) wouldDropUnread(sb *streamBuf, n int) bool {
	if len(l.followers) == 0 {
		return false
	}
	minPos := l.minFollowerPos()
	cost := sb.cost + int64(n) + chunkOverhead
	for _, c := range sb.chunks {
		if cost <= l.limit {
			return false
		}
		if c.end() > minPos {
			return true
		}
		cost -= int64(cap(c.data)) + chunkOverhead
	}
	return false
}

// minFollowerPos is the lowest position of an attached Follower, or the
// end of the log when none is attached.
func (l *Log) minFollowerPos() int64 {
	minPos := l.end
	for _, pos := range l.followers {
		minPos = min(minPos, pos)
	}
	return minPos
}

func (l *Log) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Close marks the log complete; readers see closed once they reach End.
// In a Budget, its bytes are then the first to go when room is needed.
func (l *Log) Close() {
	l.mu.Lock()
	first := !l.closed
	if first {
		l.closed = true
		l.wake()
		l.room.Broadcast()
	}
	l.mu.Unlock()
	if first && l.budget != nil {
		l.budget.finish(l)
	}
}

// Follower is a reader position that Write respects: bytes after it are
// never dropped while it is attached. Call Advance as bytes are consumed
// and Detach when done.
type Follower struct{ l *Log }

// Follow attaches a Follower at offset from.
func (l *Log) Follow(from int64) *Follower {
	f := &Follower{l: l}
	l.mu.Lock()
	l.followers[f] = max(from, 0)
	l.mu.Unlock()
	return f
}

// Advance records that everything before pos has been consumed.
func (f *Follower) Advance(pos int64) {
	l := f.l
	l.mu.Lock()
	if _, ok := l.followers[f]; ok {
		l.followers[f] = pos
	}
	l.mu.Unlock()
	l.room.Broadcast()
}

// Detach releases the Follower; Write no longer waits for it.
func (f *Follower) Detach() {
	l := f.l
	l.mu.Lock()
	delete(l.followers, f)
	l.mu.Unlock()
	l.room.Broadcast()
}

// End is the combined offset after the last byte written.
func (l *Log) End() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// Changed returns a channel closed at the next Write or Close.
func (l *Log) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Result is what one Read returns.
type Result struct {
	Pieces []Piece
	// Next is the offset to read from next: after the last returned byte,
	// or after bytes that were dropped and cannot be returned.
	Next int64
	// Lost counts the bytes between the requested offset and Next that are
	// no longer retained.
	Lost int64
	// Done is true when the log is closed and Next is its end.
	Done bool
}

// Read returns retained bytes at or after from, in offset order, up to about
// max bytes (at least one piece when any is available). A from beyond End
// is treated as End.
func (l *Log) Read(from int64, max int) Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from < 0 {
		from = 0
	}
	if from > l.end {
		from = l.end
	}
	if max <= 0 {
		max = 64 << 10
	}
	var res Result
	pos := from
	// Find, for each stream, the first chunk that ends after from.
	idx := [3]int{}
	for s := Stdout; s <= Stderr; s++ {
		cs := l.streams[s].chunks
		i := 0
		for i < len(cs) && cs[i].end() <= from {
			i++
		}
		idx[s] = i
	}
	total := 0
	for total < max {
		// Pick the stream whose next chunk starts first.
		var pick Stream
		var c chunk
		for s := Stdout; s <= Stderr; s++ {
			cs := l.streams[s].chunks
			if idx[s] < len(cs) && (pick == 0 || cs[idx[s]].off < c.off) {
				pick, c = s, cs[idx[s]]
			}
		}
		if pick == 0 {
			break
		}
		start := c.off
		data := c.data
		if start < pos {
			data = data[pos-start:]
			start = pos
		}
		if start > pos {
			res.Lost += start - pos
		}
		if room := max - total; len(data) > room && total > 0 {
			break
		} else if len(data) > room {
			data = data[:room]
		}
		res.Pieces = append(res.Pieces, Piece{Stream: pick, Offset: start, Data: data})
		total += len(data)
		pos = start + int64(len(data))
		if pos == c.end() {
			idx[pick]++
		} else {
			break
		}
	}
	if len(res.Pieces) == 0 && pos < l.end {
		// Everything between from and the end was dropped.
		res.Lost += l.end - pos
		pos = l.end
	}
	res.Next = pos
	res.Done = l.closed && pos == l.end
	return res
}

// Bytes returns the retained bytes at or after from, of every stream, in
// offset order, with the offset after them and the number of bytes lost.
func (l *Log) Bytes(from int64) (data []byte, next, lost int64) {
	for {
		r := l.Read(from, 1<<20)
		for _, p := range r.Pieces {
			data = append(data, p.Data...)
		}
		lost += r.Lost
		if r.Next == from {
			return data, r.Next, lost
		}
		from = r.Next
	}
}
