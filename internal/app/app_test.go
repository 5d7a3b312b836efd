package app

import "testing"

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1GiB", 1 << 30, true},
		{"16MiB", 16 << 20, true},
		{"3KiB", 3072, true},
		{"100", 100, true},
		{"10B", 10, true},
		{"0", 0, false},
		{"-1MiB", 0, false},
		{"MiB", 0, false},
		{"1TB", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v", tt.in, got, err)
		}
	}
}
