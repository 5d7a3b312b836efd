package procfs

import (
	"os"
	"slices"
	"testing"
)

func TestParseUIDs(t *testing.T) {
	tests := []struct {
		name   string
		status string
		want   []int
	}{
		{"four", "Name:\tsleep\nUmask:\t0022\nUid:\t1048576\t1048577\t1048578\t1048579\nGid:\t0\t0\t0\t0\n", []int{1048576, 1048577, 1048578, 1048579}},
		{"no uid line", "Name:\tx\nGid:\t0\t0\t0\t0\n", nil},
		{"garbage kept out", "Uid:\t5\tx\t-1\t7\n", []int{5, 7}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseUIDs([]byte(tt.status)); !slices.Equal(got, tt.want) {
				t.Fatalf("ParseUIDs = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUIDsHoldsOurs(t *testing.T) {
	if !UIDs()[os.Getuid()] {
		t.Fatalf("the host's uids do not hold this process's, %d", os.Getuid())
	}
}

func FuzzParseUIDs(f *testing.F) {
	f.Add([]byte("Uid:\t0\t0\t0\t0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, uid := range ParseUIDs(b) {
			if uid < 0 {
				t.Fatalf("negative uid %d", uid)
			}
		}
	})
}
