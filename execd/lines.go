package execd

import "unicode/utf8"

// lineSplitter cuts one stream's output into lines, the framing of
// OpenSandbox's execd (see wire.FramingLines): a line ends at "\n", "\r" or
// "\r\n", which is not part of its text; an empty line has the text "\n";
// a line longer than max bytes is cut into pieces of at most max bytes,
// between UTF-8 characters where the bytes are valid UTF-8.
//
// Output is fed in pieces as it was read, each with the byte offset of its
// first byte in the command's combined output (stdout and stderr share one
// offset space, so one stream's pieces need not be contiguous). Which lines
// come out does not depend on where the pieces were cut, and each line
// comes with the offset just after its last byte (its terminator included),
// from which a replay misses nothing after it.
//
// The zero value is not usable: set max.
type lineSplitter struct {
	max   int
	line  []byte // bytes of the current line not yet emitted
	spans []span // where line's bytes lie in the output
	cr    bool   // the last byte consumed was a "\r"
}

// span records that line[idx:] lies at offset off and on, up to the next
// span.
type span struct {
	idx int
	off int64
}

// emitFunc receives one line's text, valid only during the call, and the
// byte offset just after the bytes it covers.
type emitFunc func(text []byte, end int64) error

// blankLine is the text of an empty line.
var blankLine = []byte("\n")

// feed consumes data, whose first byte is at offset start, and emits every
// line it completes and every max-sized piece of an over-long line. The
// bytes of an unfinished line are kept for the next feed or flush. It
// returns the first error emit returns.
func (ls *lineSplitter) feed(data []byte, start int64, emit emitFunc) error {
	i := 0
	for i < len(data) {
		if ls.cr && data[i] == '\n' {
			// The second half of a "\r\n": the line ended at "\r".
			ls.cr = false
			i++
			continue
		}
		ls.cr = false
		j := i
		for j < len(data) && data[j] != '\n' && data[j] != '\r' {
			j++
		}
		seg := data[i:j]
		if j < len(data) && len(ls.line) == 0 && len(seg) <= ls.max {
			// The common case: a whole line within data.
			text := seg
			if len(text) == 0 {
				text = blankLine
			}
			if err := emit(text, start+int64(ls.termEnd(data, j))); err != nil {
				return err
			}
		} else {
			ls.add(seg, start+int64(i))
			if err := ls.cutLong(emit); err != nil {
				return err
			}
			if j == len(data) {
				return nil
			}
			// A held line ends here; it is never empty after cuts.
			text := ls.line
			if len(text) == 0 {
				text = blankLine
			}
			err := emit(text, start+int64(ls.termEnd(data, j)))
			ls.reset()
			if err != nil {
				return err
			}
		}
		i = ls.termEnd(data, j)
		ls.cr = data[i-1] == '\r'
	}
	return nil
}

// termEnd returns the index just after the terminator at data[j]: a "\r\n"
// within data counts as one. A "\r" that ends data may be the first half of
// one; feed then skips the "\n" that starts the next data (the line's
// offset is then the one after the "\r").
func (ls *lineSplitter) termEnd(data []byte, j int) int {
	if data[j] == '\r' && j+1 < len(data) && data[j+1] == '\n' {
		return j + 2
	}
	return j + 1
}

// flush emits the bytes of an unfinished line, if any, as a line: when
// the output ends, or before a gap in it.
func (ls *lineSplitter) flush(emit emitFunc) error {
	ls.cr = false
	if len(ls.line) == 0 {
		return nil
	}
	err := emit(ls.line, ls.endOf(len(ls.line)))
	ls.reset()
	return err
}

func (ls *lineSplitter) reset() {
	ls.line, ls.spans = ls.line[:0], ls.spans[:0]
}

// add appends seg, which lies at offset off, to the current line.
func (ls *lineSplitter) add(seg []byte, off int64) {
	if len(seg) == 0 {
		return
	}
	if n := len(ls.spans); n > 0 {
		last := ls.spans[n-1]
		if last.off+int64(len(ls.line)-last.idx) == off {
			ls.line = append(ls.line, seg...)
			return
		}
	}
	ls.spans = append(ls.spans, span{idx: len(ls.line), off: off})
	ls.line = append(ls.line, seg...)
}

// endOf returns the offset just after line[k-1] (k >= 1).
func (ls *lineSplitter) endOf(k int) int64 {
	s := ls.spans[0]
	for _, sp := range ls.spans[1:] {
		if sp.idx >= k {
			break
		}
		s = sp
	}
	return s.off + int64(k-s.idx)
}

// cutLong emits max-sized pieces of the current line while it is longer
// than max.
func (ls *lineSplitter) cutLong(emit emitFunc) error {
	for len(ls.line) > ls.max {
		n := pieceLen(ls.line, ls.max)
		if err := emit(ls.line[:n], ls.endOf(n)); err != nil {
			return err
		}
		ls.line = append(ls.line[:0], ls.line[n:]...)
		keep := ls.spans[:0]
		for k, sp := range ls.spans {
			next := len(ls.line) + n // the end of the old line
			if k+1 < len(ls.spans) {
				next = ls.spans[k+1].idx
			}
			if next <= n {
				continue // entirely emitted
			}
			if sp.idx < n {
				sp.off += int64(n - sp.idx)
				sp.idx = n
			}
			sp.idx -= n
			keep = append(keep, sp)
		}
		ls.spans = keep
	}
	return nil
}

// pieceLen is how many bytes of text, which is longer than max, the next
// piece of an over-long line takes: max, or less so as not to cut a UTF-8
// character in two (at most utf8.UTFMax-1 less).
func pieceLen(text []byte, max int) int {
	for i := max; i > 0 && i > max-utf8.UTFMax; i-- {
		if utf8.RuneStart(text[i]) {
			return i
		}
	}
	return max
}
