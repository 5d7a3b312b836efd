package execd

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/execd/wire"
)

// keepAlive is how often an idle event stream gets a comment frame, so that
// proxies and clients do not time it out.
const keepAlive = 15 * time.Second

// maxEventBytes bounds the text of one output event.
const maxEventBytes = 64 << 10

func nowMillis() int64 { return time.Now().UnixMilli() }

// streamOutput writes log's output from offset `from` as stdout/stderr
// events whose SSE id is the offset to resume from. With follow it waits for
// more until the log is complete; without, it stops after what is there. It
// returns the offset reached, or ctx's error when the client went away.
//
// The events are framed as sw says (see wire.FramingLines): one per line,
// a partial last line sent when the output ends or has a gap; or the bytes
// as read, where a multi-byte character split between reads is held back
// and sent whole with the next event, so that text is valid UTF-8 where
// the output is.
//
// While following, the stream holds a Follower on the log, so a slow client
// slows the command down rather than lose output.
//
// follower, when not nil, is a Follower already attached at from (to cover
// the time before this call); streamOutput advances and detaches it.
func streamOutput(ctx context.Context, sw *eventWriter, log *outlog.Log, from int64, follow bool, follower *outlog.Follower) (int64, error) {
	var out outputFramer = &byteFramer{sw: sw}
	readMax := maxEventBytes
	if sw.lines {
		out = newLineFramer(sw)
		readMax = lineReadBytes
	}
	pos := from
	if follower == nil && follow {
		follower = log.Follow(from)
	}
	if follower != nil {
		defer follower.Detach()
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		changed := log.Changed()
		res := log.Read(pos, readMax)
		if res.Lost > 0 {
			if err := out.gap(); err != nil {
				return pos, err
			}
			ev := wire.Event{Type: wire.EventStatus, Timestamp: nowMillis(), Lost: res.Lost,
				Text: fmt.Sprintf("%d bytes of output were no longer retained", res.Lost)}
			if err := sw.Event("", ev.Type, ev); err != nil {
				return pos, err
			}
		}
		for _, p := range res.Pieces {
			if err := out.piece(p); err != nil {
				return pos, err
			}
		}
		pos = res.Next
		if res.Done || (!follow && len(res.Pieces) == 0) {
			if err := out.end(pos); err != nil {
				return pos, err
			}
			return pos, nil
		}
		if err := out.commit(); err != nil {
			return pos, err
		}
		if follower != nil {
			follower.Advance(pos)
		}
		if len(res.Pieces) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-tick.C:
			if err := sw.Comment("ping"); err != nil {
				return pos, err
			}
		case <-ctx.Done():
			return pos, ctx.Err()
		}
	}
}

// outputFramer turns the pieces of a log into output events.
type outputFramer interface {
	// piece takes the next piece read.
	piece(p outlog.Piece) error
	// commit writes what the pieces so far produced.
	commit() error
	// gap writes what is held back, before output that was not retained.
	gap() error
	// end writes what is held back when the output ends at offset pos.
	end(pos int64) error
}

// byteFramer writes each piece as one event (wire.FramingBytes).
type byteFramer struct {
	sw    *eventWriter
	carry [3][]byte // per stream: an incomplete UTF-8 character held back
}

func (f *byteFramer) piece(p outlog.Piece) error {
	data := p.Data
	if c := f.carry[p.Stream]; len(c) > 0 {
		data = append(append([]byte(nil), c...), data...)
	}
	var held []byte
	data, held = splitIncompleteRune(data)
	f.carry[p.Stream] = held
	if len(data) == 0 {
		return nil
	}
	id := strconv.FormatInt(p.Offset+int64(len(p.Data))-int64(len(held)), 10)
	return writeOutput(f.sw, id, p.Stream, data)
}

func (f *byteFramer) commit() error { return nil }
func (f *byteFramer) gap() error    { return nil }

func (f *byteFramer) end(pos int64) error {
	for s, c := range f.carry {
		if len(c) > 0 {
			if err := writeOutput(f.sw, strconv.FormatInt(pos, 10), outlog.Stream(s), c); err != nil {
				return err
			}
			f.carry[s] = nil
		}
	}
	return nil
}

// lineReadBytes is how much output a line-framed stream reads at a time:
// its lines go out in one write.
const lineReadBytes = 256 << 10

// lineBatchBytes is the size of encoded events after which a line-framed
// stream writes them without waiting for the end of the read.
const lineBatchBytes = 1 << 20

// lineFramer writes one event per line (wire.FramingLines). Lines are
// encoded into one buffer, without allocating per line, and written with
// one write and flush per read (or per lineBatchBytes): a command that
// prints millions of short lines costs a few system calls per read rather
// than one per line.
type lineFramer struct {
	sw    *eventWriter
	split [3]lineSplitter // per stream
	buf   []byte
	ts    int64 // the timestamp of the events of the current batch
	emits [3]emitFunc
}

func newLineFramer(sw *eventWriter) *lineFramer {
	f := &lineFramer{sw: sw}
	for s := outlog.Stdout; s <= outlog.Stderr; s++ {
		f.split[s].max = wire.MaxLineBytes
		f.emits[s] = func(text []byte, end int64) error { return f.emit(s, text, end) }
	}
	return f
}

func (f *lineFramer) emit(s outlog.Stream, text []byte, end int64) error {
	if f.ts == 0 {
		f.ts = nowMillis()
	}
	f.buf = appendLineEvent(f.buf, s, text, end, f.ts)
	if len(f.buf) >= lineBatchBytes {
		return f.commit()
	}
	return nil
}

func (f *lineFramer) piece(p outlog.Piece) error {
	return f.split[p.Stream].feed(p.Data, p.Offset, f.emits[p.Stream])
}

func (f *lineFramer) commit() error {
	f.ts = 0
	if len(f.buf) == 0 {
		return nil
	}
	err := f.sw.WriteFrames(f.buf)
	if cap(f.buf) > 4*lineBatchBytes {
		f.buf = nil // do not keep a burst's buffer for a long stream
	} else {
		f.buf = f.buf[:0]
	}
	return err
}

// gap flushes the partial lines: the bytes after a gap do not continue them.
func (f *lineFramer) gap() error {
	for s := outlog.Stdout; s <= outlog.Stderr; s++ {
		if err := f.split[s].flush(f.emits[s]); err != nil {
			return err
		}
	}
	return f.commit()
}

func (f *lineFramer) end(int64) error { return f.gap() }

func writeOutput(sw *eventWriter, id string, s outlog.Stream, data []byte) error {
	return sw.Output(id, s, data)
}

// splitIncompleteRune splits off a trailing, incomplete UTF-8 sequence.
func splitIncompleteRune(b []byte) (whole, tail []byte) {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], b[i:]
			}
			break
		}
	}
	return b, nil
}
