package outlog

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

func TestReadMergesStreamsInOrder(t *testing.T) {
	l := New(1 << 20)
	l.Write(Stdout, []byte("a1"))
	l.Write(Stderr, []byte("b1"))
	l.Write(Stdout, []byte("a2"))
	l.Write(Stdout, []byte("a3"))
	l.Close()

	tests := []struct {
		name string
		from int64
		want string // stream letter per piece + data
	}{
		{"from start", 0, "o:a1 e:b1 o:a2a3"},
		{"mid chunk", 1, "o:1 e:b1 o:a2a3"},
		{"from stderr", 2, "e:b1 o:a2a3"},
		{"from end", 8, ""},
		{"beyond end", 100, ""},
		{"negative", -5, "o:a1 e:b1 o:a2a3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := l.Read(tt.from, 0)
			if got := render(r.Pieces); got != tt.want {
				t.Fatalf("pieces = %q, want %q", got, tt.want)
			}
			if r.Next != 8 || !r.Done || r.Lost != 0 {
				t.Fatalf("next=%d done=%v lost=%d, want 8 true 0", r.Next, r.Done, r.Lost)
			}
		})
	}
}

func render(ps []Piece) string {
	var b bytes.Buffer
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		if p.Stream == Stdout {
			b.WriteString("o:")
		} else {
			b.WriteString("e:")
		}
		b.Write(p.Data)
	}
	return b.String()
}

func TestBudgetDropsOldestAndReportsLoss(t *testing.T) {
	l := New(minLimit)
	chunk := bytes.Repeat([]byte("x"), minLimit/2)
	for i := 0; i < 10; i++ {
		// A stderr write between stdout writes stops coalescing.
		l.Write(Stdout, chunk)
		l.Write(Stderr, []byte{'e'})
	}
	r := l.Read(0, 1<<30)
	var stdout int
	for _, p := range r.Pieces {
		if p.Stream == Stdout {
			stdout += len(p.Data)
		}
	}
	if stdout > minLimit || stdout == 0 {
		t.Fatalf("retained %d stdout bytes, want 1..%d", stdout, minLimit)
	}
	if r.Lost == 0 {
		t.Fatal("expected lost bytes to be reported")
	}
	if r.Next != l.End() {
		t.Fatalf("next = %d, want end %d", r.Next, l.End())
	}
}

func TestSingleHugeWriteKeepsTail(t *testing.T) {
	l := New(minLimit)
	p := make([]byte, minLimit+4000)
	for i := range p {
		p[i] = byte(i)
	}
	l.Write(Stdout, p)
	data, next, lost := l.Bytes(0)
	if !bytes.Equal(data, p[4000:]) || next != int64(len(p)) || lost != 4000 {
		t.Fatalf("len=%d next=%d lost=%d", len(data), next, lost)
	}
}

func TestReadRespectsMax(t *testing.T) {
	l := New(1 << 20)
	l.Write(Stdout, bytes.Repeat([]byte("a"), 100))
	r := l.Read(0, 10)
	if len(r.Pieces) != 1 || len(r.Pieces[0].Data) != 10 || r.Next != 10 {
		t.Fatalf("got %+v", r)
	}
}

func TestConcurrentWriterAndFollower(t *testing.T) {
	l := New(64 << 20)
	const n = 2000
	var want bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			l.Write(Stdout, []byte(fmt.Sprintf("line %d\n", i)))
		}
		l.Close()
	}()
	var got bytes.Buffer
	var off int64
	for {
		ch := l.Changed()
		r := l.Read(off, 1024)
		for _, p := range r.Pieces {
			got.Write(p.Data)
		}
		off = r.Next
		if r.Done {
			break
		}
		if len(r.Pieces) == 0 {
			<-ch
		}
	}
	wg.Wait()
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("follower got %d bytes, want %d", got.Len(), want.Len())
	}
}

func TestFollowerIsNeverOverrun(t *testing.T) {
	l := New(minLimit)
	f := l.Follow(0)
	const total = 8 * minLimit
	go func() {
		chunk := bytes.Repeat([]byte("y"), 1000)
		for n := 0; n < total; n += len(chunk) {
			l.Write(Stdout, chunk)
			l.Write(Stderr, chunk[:1])
		}
		l.Close()
	}()
	var got, lost int64
	var off int64
	for {
		ch := l.Changed()
		r := l.Read(off, 4096)
		for _, p := range r.Pieces {
			got += int64(len(p.Data))
		}
		lost += r.Lost
		off = r.Next
		f.Advance(off)
		if r.Done {
			break
		}
		if len(r.Pieces) == 0 {
			<-ch
		}
	}
	f.Detach()
	if lost != 0 || got != l.End() {
		t.Fatalf("follower lost %d bytes, read %d of %d", lost, got, l.End())
	}
}

func TestWriteAfterCloseIsDropped(t *testing.T) {
	l := New(0)
	l.Write(Stdout, []byte("a"))
	l.Close()
	l.Write(Stdout, []byte("b"))
	if l.End() != 1 {
		t.Fatalf("end = %d", l.End())
	}
}

func FuzzLogInvariants(f *testing.F) {
	f.Add([]byte("abc"), int64(3), int64(16))
	f.Fuzz(func(t *testing.T, ops []byte, from int64, limit int64) {
		if limit < 0 || limit > 1<<20 {
			limit = 64
		}
		l := New(limit)
		for i, b := range ops {
			s := Stdout
			if b&1 == 1 {
				s = Stderr
			}
			l.Write(s, bytes.Repeat([]byte{b}, int(b%17)+i%3))
		}
		r := l.Read(from, int(limit)+1)
		pos := max(min(from, l.End()), 0)
		for _, p := range r.Pieces {
			if p.Offset < pos {
				t.Fatalf("piece at %d before position %d", p.Offset, pos)
			}
			pos = p.Offset + int64(len(p.Data))
		}
		if r.Next < pos || r.Next > l.End() {
			t.Fatalf("next %d outside [%d,%d]", r.Next, pos, l.End())
		}
	})
}
