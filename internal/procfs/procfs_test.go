package procfs

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		in    string
		state byte
		start uint64
		ok    bool
	}{
		{"1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42 100 200", 'S', 42, true},
		{"7 (a) b) (c) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", 'Z', 99, true},
		{"9 (sh) R 1", 0, 0, false},
		{"no paren", 0, 0, false},
		{"3 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 notanumber", 0, 0, false},
	}
	for _, tt := range tests {
		state, start, err := ParseStat([]byte(tt.in))
		if (err == nil) != tt.ok || state != tt.state || start != tt.start {
			t.Errorf("ParseStat(%q) = %q %d %v", tt.in, state, start, err)
		}
	}
}

func TestStartTimeOfSelf(t *testing.T) {
	if StartTime(os.Getpid()) == 0 {
		t.Fatal("own start time is 0")
	}
	if StartTime(1<<30) != 0 {
		t.Fatal("a missing process has a start time")
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42 100 200"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = ParseStat(b)
	})
}
