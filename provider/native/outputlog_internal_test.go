package native

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCappedLogKeepsTheNewestBytes(t *testing.T) {
	const max = 64
	chunk := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	tests := []struct {
		name   string
		writes [][]byte
		want   string // the file's content after the writes
	}{
		{"under the cap", [][]byte{[]byte("hello "), []byte("world")}, "hello world"},
		{"exactly the cap", [][]byte{chunk('a', 40), chunk('b', 24)}, strings.Repeat("a", 40) + strings.Repeat("b", 24)},
		{"one past the cap", [][]byte{chunk('a', 64), []byte("z")}, logDropped + strings.Repeat("a", 31) + "z"},
		{"a write larger than the cap", [][]byte{[]byte("x"), chunk('c', 200)}, logDropped + strings.Repeat("c", 32)},
		{"many small writes", repeat([]byte("0123456789"), 100), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "log"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			l, err := newCappedLog(f, max)
			if err != nil {
				t.Fatal(err)
			}
			var all []byte
			for _, w := range tc.writes {
				if n, err := l.Write(w); err != nil || n != len(w) {
					t.Fatalf("write: %d %v", n, err)
				}
				all = append(all, w...)
				if fi, _ := f.Stat(); fi.Size() > max+int64(len(logDropped)) {
					t.Fatalf("the log grew to %d bytes (cap %d)", fi.Size(), max)
				}
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && string(got) != tc.want {
				t.Fatalf("log = %q, want %q", got, tc.want)
			}
			// Whatever the writes, the log ends with the newest bytes.
			body := strings.TrimPrefix(string(got), logDropped)
			if !bytes.HasSuffix(all, []byte(body)) || len(body) == 0 {
				t.Fatalf("log %q is not the end of what was written", got)
			}
			// And more writes go on after it.
			if _, err := l.Write([]byte("!")); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(f.Name()); !bytes.HasSuffix(got, []byte("!")) {
				t.Fatalf("log after one more write: %q", got)
			}
		})
	}
}

func repeat(b []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

func TestReadTailReadsNoMoreThanAsked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 10000)+"the end"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    int64
		want string
	}{{7, "the end"}, {3, "end"}, {20000, strings.Repeat("x", 10000) + "the end"}} {
		got, err := readTail(path, tc.n)
		if err != nil || string(got) != tc.want {
			t.Errorf("readTail(%d) = %q %v, want %q", tc.n, got, err, tc.want)
		}
	}
}

func TestDeadlineFile(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_123)
	far := time.UnixMilli(time.Now().Add(1 << 62).UnixMilli()) // beyond int64 nanoseconds
	tests := []struct {
		name   string
		in     []byte
		want   time.Time
		wantOK bool
	}{
		{"none", encodeDeadline(time.Time{}), time.Time{}, true},
		{"a deadline", encodeDeadline(at), at, true},
		{"far away", encodeDeadline(far), far, true},
		{"torn", []byte("0000000018000000\n"), time.Time{}, false},
		{"not a number", []byte("00000000000000000x00\n"), time.Time{}, false},
		{"negative", []byte("-0000000000000000001\n"), time.Time{}, false},
		{"empty", nil, time.Time{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := decodeDeadline(tc.in)
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Fatalf("decode %q = %v %v, want %v %v", tc.in, got, ok, tc.want, tc.wantOK)
			}
		})
	}
	// init reads what the host writes.
	f, err := os.Create(filepath.Join(t.TempDir(), deadlineFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := initDeadline{f}
	for _, tc := range []struct {
		at     time.Time
		passed bool
	}{{time.Time{}, false}, {time.Now().Add(time.Hour), false}, {time.Now().Add(-time.Second), true}} {
		if _, err := f.WriteAt(encodeDeadline(tc.at), 0); err != nil {
			t.Fatal(err)
		}
		if _, passed := d.passed(time.Now()); passed != tc.passed {
			t.Errorf("deadline %v: passed = %v, want %v", tc.at, passed, tc.passed)
		}
	}
}
