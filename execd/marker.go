package execd

import (
	"bytes"
	"errors"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/execd/outlog"
)

// Sentinel framing of a long-lived process's output.
//
// A bash session and a code context are one process that serves many runs.
// Its stdout and stderr are pipes read for the whole life of the process;
// each run is given a unique marker, and the process writes
// "<marker><trailer>\n" to both streams once the run's own output is
// complete. Bytes before the marker belong to the run; the marker line is
// never shown to a client; bytes that arrive outside a run (a background
// job printing late) are kept only as a short diagnostic tail.

// maxTrailer bounds the text between a marker and its newline.
const maxTrailer = 64

// orphanTailBytes bounds the output kept from outside any run.
const orphanTailBytes = 4 << 10

// markerSplitter finds a run's end marker in one output stream fed in
// arbitrary pieces. The zero value is not usable; set marker.
type markerSplitter struct {
	marker  []byte
	pending []byte // held back: a possible start of the marker, or the marker and a partial trailer
	matched bool   // pending starts with the whole marker
}

// feed consumes p. out is the run's output found before the marker (safe to
// deliver now); once the marker line is complete, done is true, trailer is
// the text between the marker and the newline (at most maxTrailer bytes)
// and rest is what followed the line. After done the splitter must not be
// fed again. out and rest may alias p.
func (m *markerSplitter) feed(p []byte) (out []byte, done bool, trailer string, rest []byte) {
	buf := p
	if len(m.pending) > 0 {
		buf = append(m.pending, p...)
		m.pending = nil
	}
	if !m.matched {
		i := bytes.Index(buf, m.marker)
		if i < 0 {
			k := partialSuffix(buf, m.marker)
			m.pending = bytes.Clone(buf[len(buf)-k:])
			return buf[:len(buf)-k], false, "", nil
		}
		out, buf = buf[:i], buf[i:]
		m.matched = true
	}
	after := buf[len(m.marker):]
	if j := bytes.IndexByte(after, '\n'); j >= 0 && j <= maxTrailer {
		return out, true, string(after[:j]), after[j+1:]
	}
	if len(after) > maxTrailer {
		return out, true, string(after[:maxTrailer]), after[maxTrailer:]
	}
	m.pending = bytes.Clone(buf)
	return out, false, "", nil
}

// flush returns the bytes held back as a possible marker start, for a
// stream that ended without its marker. A matched marker is never output.
func (m *markerSplitter) flush() []byte {
	if m.matched {
		return nil
	}
	p := m.pending
	m.pending = nil
	return p
}

// partialSuffix is the length of the longest proper prefix of marker that
// buf ends with.
func partialSuffix(buf, marker []byte) int {
	for k := min(len(buf), len(marker)-1); k > 0; k-- {
		if bytes.HasSuffix(buf, marker[:k]) {
			return k
		}
	}
	return 0
}

// framedOutput routes the stdout and stderr of a long-lived process to its
// current run. Its methods are safe for concurrent use.
type framedOutput struct {
	mu   sync.Mutex
	run  *framedRun
	tail []byte // recent output from outside any run
}

// framedRun is one run's view of the output: the bytes before its markers
// go to out.
type framedRun struct {
	out     *outlog.Log
	split   [3]markerSplitter // indexed by outlog.Stream
	trailer [3]string
	seen    [3]chan struct{} // closed when the stream's marker line was read
	// active is when output was last delivered to out (unix ns), or
	// math.MaxInt64 while a delivery is in progress (a Write waiting
	// for a slow client is progress, not idleness).
	active atomic.Int64
}

// begin makes a fresh run, ended by marker on both streams, the current
// one. Output read from now on goes to out until the markers.
func (f *framedOutput) begin(marker string, out *outlog.Log) *framedRun {
	r := &framedRun{out: out}
	r.active.Store(time.Now().UnixNano())
	for _, s := range []outlog.Stream{outlog.Stdout, outlog.Stderr} {
		r.split[s].marker = []byte(marker)
		r.seen[s] = make(chan struct{})
	}
	f.mu.Lock()
	f.run = r
	f.mu.Unlock()
	return r
}

// end detaches r (if current) and writes the bytes its splitters held back
// on streams whose marker never came. It returns r's stdout trailer.
func (f *framedOutput) end(r *framedRun) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.run == r {
		f.run = nil
	}
	for _, s := range []outlog.Stream{outlog.Stdout, outlog.Stderr} {
		if !closed(r.seen[s]) {
			r.out.Write(s, r.split[s].flush())
		}
	}
	return r.trailer[outlog.Stdout]
}

// route delivers one piece read from stream s.
func (f *framedOutput) route(s outlog.Stream, p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.run
	if r == nil || closed(r.seen[s]) {
		f.orphan(p)
		return
	}
	out, done, trailer, rest := r.split[s].feed(p)
	r.active.Store(math.MaxInt64)
	r.out.Write(s, out)
	r.active.Store(time.Now().UnixNano())
	if done {
		r.trailer[s] = trailer
		close(r.seen[s])
		f.orphan(rest)
	}
}

func (f *framedOutput) orphan(p []byte) {
	if len(p) == 0 {
		return
	}
	f.tail = append(f.tail, p...)
	if over := len(f.tail) - orphanTailBytes; over > 0 {
		f.tail = append(f.tail[:0:0], f.tail[over:]...)
	}
}

// orphanTail returns the recent output that belonged to no run (for
// diagnostics, such as why an interpreter failed to start).
func (f *framedOutput) orphanTail() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return string(f.tail)
}

// pump reads r until EOF or error, routing what it reads as stream s. When
// r's read deadline passes, it still routes whatever r holds at that
// moment, then returns.
func (f *framedOutput) pump(r *os.File, s outlog.Stream) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			f.route(s, buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			readAvailable(r, buf, func(p []byte) { f.route(s, p) })
			return
		}
		if err != nil {
			return
		}
	}
}

// readAvailable passes to fn what r holds now, without waiting for more.
func readAvailable(r *os.File, buf []byte, fn func([]byte)) {
	// RawConn.Read refuses to run past an expired deadline.
	_ = r.SetReadDeadline(time.Time{})
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return true
			}
			fn(buf[:n])
		}
	})
}

// drainAfterExit is called once a process exited: it waits for the readers
// of its pipes (readers) up to pipeDrainGrace, so that they reach EOF, and
// then, if a process it left behind still holds a pipe, expires the reads.
func drainAfterExit(readers *sync.WaitGroup, files ...*os.File) {
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	t := time.NewTimer(pipeDrainGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		for _, f := range files {
			_ = f.SetReadDeadline(time.Now())
		}
		<-done
	}
}

// waitMarked waits until the marker of every stream in streams was read,
// or exited is closed, or (when idle > 0) no output was delivered to the
// run for idle. It reports whether all markers arrived.
func (r *framedRun) waitMarked(streams []outlog.Stream, exited <-chan struct{}, idle time.Duration) bool {
	var timer *time.Timer
	var timeout <-chan time.Time
	if idle > 0 {
		timer = time.NewTimer(idle)
		defer timer.Stop()
		timeout = timer.C
	}
	for _, s := range streams {
		for !closed(r.seen[s]) {
			select {
			case <-r.seen[s]:
			case <-exited:
				// The pipes were drained before exited closed.
				if !closed(r.seen[s]) {
					return false
				}
			case <-timeout:
				quiet := time.Duration(time.Now().UnixNano() - r.active.Load())
				if quiet >= idle {
					return false
				}
				timer.Reset(idle - max(quiet, 0))
			}
		}
	}
	return true
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
