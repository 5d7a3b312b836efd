package outlog

import (
	"bytes"
	"testing"
)

func fill(l *Log, s Stream, n int) {
	p := bytes.Repeat([]byte("x"), 32<<10)
	for n > 0 {
		k := min(n, len(p))
		l.Write(s, p[:k])
		n -= k
	}
}

func TestBudgetFreesFinishedLogsFirst(t *testing.T) {
	b := NewBudget(1 << 20)
	old := NewIn(b, 8<<20)
	fill(old, Stdout, 400<<10)
	old.Close()
	running := NewIn(b, 8<<20)
	fill(running, Stdout, 300<<10)
	if old.Dropped() != 0 {
		t.Fatalf("a finished log lost bytes while the budget had room: %d", old.Dropped())
	}
	fill(running, Stderr, 300<<10)
	if old.Dropped() != 400<<10 || running.Dropped() != 0 {
		t.Fatalf("dropped: finished %d, running %d; want the finished log's 400 KiB and none of the running one's", old.Dropped(), running.Dropped())
	}
	if r := old.Read(0, 1<<20); r.Lost != 400<<10 || len(r.Pieces) != 0 {
		t.Fatalf("a reader of the freed log sees %d lost and %d pieces", r.Lost, len(r.Pieces))
	}
	if used := b.Used(); used > 1<<20 {
		t.Fatalf("budget holds %d, over its limit", used)
	}
}

func TestBudgetTrimsTheWriterLast(t *testing.T) {
	b := NewBudget(1 << 20)
	l := NewIn(b, 8<<20)
	fill(l, Stdout, 3<<20)
	if used := b.Used(); used > 1<<20 {
		t.Fatalf("budget holds %d, over its limit of 1 MiB", used)
	}
	if d := l.Dropped(); d < 2<<20 {
		t.Fatalf("dropped %d, want at least 2 MiB", d)
	}
	r := l.Read(0, 4<<20)
	if r.Lost != l.Dropped() || r.Next != 3<<20 {
		t.Fatalf("read from 0: lost %d (dropped %d), next %d", r.Lost, l.Dropped(), r.Next)
	}
	b.Forget(l)
	if b.Used() != 0 {
		t.Fatalf("a forgotten log still counts: %d", b.Used())
	}
}

func TestBudgetKeepsWhatAFollowerHasNotRead(t *testing.T) {
	b := NewBudget(512 << 10)
	l := NewIn(b, 8<<20)
	f := l.Follow(0)
	fill(l, Stdout, 1<<20)
	if l.Dropped() != 0 {
		t.Fatalf("bytes a follower had not read were dropped: %d", l.Dropped())
	}
	f.Advance(l.End())
	fill(l, Stdout, 64<<10)
	if l.Dropped() == 0 || b.Used() > 512<<10+(128<<10) {
		t.Fatalf("once read, the budget still holds %d (dropped %d)", b.Used(), l.Dropped())
	}
	f.Detach()
}
