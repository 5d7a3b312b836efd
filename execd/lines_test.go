package execd

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// gotLine is one emitted line.
type gotLine struct {
	Text string
	End  int64
}

// splitAll feeds pieces (each at its offset) to a splitter with max and
// flushes it.
func splitAll(t testing.TB, max int, pieces []testPiece) []gotLine {
	t.Helper()
	ls := &lineSplitter{max: max}
	var out []gotLine
	emit := func(text []byte, e int64) error {
		out = append(out, gotLine{string(text), e})
		return nil
	}
	for _, p := range pieces {
		if err := ls.feed([]byte(p.data), p.off, emit); err != nil {
			t.Fatal(err)
		}
	}
	if err := ls.flush(emit); err != nil {
		t.Fatal(err)
	}
	return out
}

type testPiece struct {
	data string
	off  int64
}

func TestLineSplitter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		pieces []testPiece
		want   []gotLine
	}{
		{"one line", 100, []testPiece{{"connect-ok\n", 0}}, []gotLine{{"connect-ok", 11}}},
		{"two lines in one read", 100, []testPiece{{"line-a\nline-b\n", 0}}, []gotLine{{"line-a", 7}, {"line-b", 14}}},
		{"partial last line flushed", 100, []testPiece{{"a\nno newline", 0}}, []gotLine{{"a", 2}, {"no newline", 12}}},
		{"line across reads", 100, []testPiece{{"hel", 0}, {"lo\nwo", 3}, {"rld\n", 8}}, []gotLine{{"hello", 6}, {"world", 12}}},
		{"empty lines", 100, []testPiece{{"a\n\n\nb\n", 0}}, []gotLine{{"a", 2}, {"\n", 3}, {"\n", 4}, {"b", 6}}},
		{"crlf", 100, []testPiece{{"a\r\nb\r\n", 0}}, []gotLine{{"a", 3}, {"b", 6}}},
		{"crlf across reads", 100, []testPiece{{"a\r", 0}, {"\nb\n", 2}}, []gotLine{{"a", 2}, {"b", 5}}},
		{"bare cr", 100, []testPiece{{"10%\r20%\r\r", 0}}, []gotLine{{"10%", 4}, {"20%", 8}, {"\n", 9}}},
		{"nothing", 100, nil, nil},
		{"over-long line", 4, []testPiece{{"abcdefghij\n", 0}}, []gotLine{{"abcd", 4}, {"efgh", 8}, {"ij", 11}}},
		{"over-long line of exactly max", 4, []testPiece{{"abcd\nabcdefgh\n", 0}}, []gotLine{{"abcd", 5}, {"abcd", 9}, {"efgh", 14}}},
		{"over-long unfinished line", 4, []testPiece{{"abcdef", 0}}, []gotLine{{"abcd", 4}, {"ef", 6}}},
		{"utf-8 kept whole", 4, []testPiece{{"ab\u00e9\u00e9\n", 0}}, []gotLine{{"ab\u00e9", 4}, {"\u00e9", 7}}},
		{"utf-8 three bytes", 4, []testPiece{{"a\u20ac\u20ac\n", 0}}, []gotLine{{"a\u20ac", 4}, {"\u20ac", 8}}},
		{"invalid utf-8 cut at max", 2, []testPiece{{"\x80\x80\x80\n", 0}}, []gotLine{{"\x80\x80", 2}, {"\x80", 4}}},
		// The other stream's bytes lie between this stream's pieces.
		{"offsets with gaps", 100, []testPiece{{"ab", 0}, {"c\n", 10}, {"d\n", 20}}, []gotLine{{"abc", 12}, {"d", 22}}},
		{"long line across gaps", 3, []testPiece{{"ab", 0}, {"cd", 10}, {"ef\n", 20}}, []gotLine{{"abc", 11}, {"def", 23}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := splitAll(t, tc.max, tc.pieces)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLineSplitterEmitError(t *testing.T) {
	ls := &lineSplitter{max: 10}
	stop := fmt.Errorf("stop")
	n := 0
	err := ls.feed([]byte("a\nb\nc\n"), 0, func([]byte, int64) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Fatalf("feed returned %v after %d lines, want the emit error after 1", err, n)
	}
}

// refSplit is the reference: the same rules applied one byte at a time,
// with each byte's offset given, and whether it ends its read.
func refSplit(data []byte, offs []int64, lastOfRead []bool, max int) []gotLine {
	var out []gotLine
	var line []byte
	var lineOffs []int64
	cut := func() {
		for len(line) > max {
			n := pieceLen(line, max)
			out = append(out, gotLine{string(line[:n]), lineOffs[n-1] + 1})
			line, lineOffs = append([]byte(nil), line[n:]...), append([]int64(nil), lineOffs[n:]...)
		}
	}
	cr := false
	for i, b := range data {
		if cr && b == '\n' {
			cr = false
			continue
		}
		cr = false
		if b == '\n' || b == '\r' {
			text := string(line)
			if text == "" {
				text = "\n"
			}
			e := offs[i] + 1
			if b == '\r' && !lastOfRead[i] && i+1 < len(data) && data[i+1] == '\n' {
				e++
			}
			out = append(out, gotLine{text, e})
			line, lineOffs = nil, nil
			cr = b == '\r'
			continue
		}
		line = append(line, b)
		lineOffs = append(lineOffs, offs[i])
		cut()
	}
	if len(line) > 0 {
		out = append(out, gotLine{string(line), lineOffs[len(lineOffs)-1] + 1})
	}
	return out
}

// FuzzLineSplitter checks the splitter against the byte-at-a-time
// reference for any output, any cut into reads and any gaps between them
// (the other stream's bytes), and the framing's invariants.
func FuzzLineSplitter(f *testing.F) {
	f.Add([]byte("connect-ok\n"), []byte{3}, uint8(8))
	f.Add([]byte("line-a\nline-b\n\n\r\nx\ry"), []byte{1, 5, 2, 0, 7}, uint8(3))
	f.Add([]byte("h\u00e9llo w\u20acrld \xff\xfe\n"), []byte{2, 2, 2}, uint8(4))
	f.Add([]byte(strings.Repeat("z", 300)+"\r"), []byte{100, 1, 50}, uint8(0))
	f.Fuzz(func(t *testing.T, data, cuts []byte, maxSeed uint8) {
		max := int(maxSeed)%64 + utf8.UTFMax
		// Cut data into pieces; piece k is preceded by a gap of k%3 bytes.
		var pieces []testPiece
		offs := make([]int64, 0, len(data))
		var lastOfRead []bool
		var off int64
		rest := data
		for k := 0; len(rest) > 0; k++ {
			n := len(rest)
			if k < len(cuts) {
				n = min(int(cuts[k])+1, len(rest))
			}
			off += int64(k % 3)
			pieces = append(pieces, testPiece{string(rest[:n]), off})
			for i := range n {
				offs = append(offs, off+int64(i))
				lastOfRead = append(lastOfRead, i == n-1)
			}
			off += int64(n)
			rest = rest[n:]
		}
		got := splitAll(t, max, pieces)
		want := refSplit(data, offs, lastOfRead, max)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("max %d, pieces %+v:\ngot  %+v\nwant %+v", max, pieces, got, want)
		}
		// Invariants: bounded texts without terminators (but for a blank
		// line), increasing offsets, and every byte but the terminators
		// delivered in order.
		var joined []byte
		var last int64 = -1
		for _, l := range got {
			if len(l.Text) > max {
				t.Fatalf("line of %d bytes > max %d", len(l.Text), max)
			}
			if l.Text != "\n" {
				if strings.ContainsAny(l.Text, "\r\n") {
					t.Fatalf("line %q holds a terminator", l.Text)
				}
				joined = append(joined, l.Text...)
			}
			if l.End <= last || l.End > off {
				t.Fatalf("offset %d after %d (end %d)", l.End, last, off)
			}
			last = l.End
		}
		stripped := bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r"), nil), []byte("\n"), nil)
		if !bytes.Equal(joined, stripped) {
			t.Fatalf("joined lines %q, want %q", joined, stripped)
		}
	})
}
