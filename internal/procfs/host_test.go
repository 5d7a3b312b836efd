package procfs

import "testing"

func TestParseMemTotal(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"MemTotal:       24684084 kB\nMemFree: 1 kB\n", 24684084 << 10, true},
		{"MemFree: 1 kB\nMemTotal: 1024 kB\n", 1 << 20, true},
		{"MemTotal: 12 MB\n", 0, false},
		{"MemTotal: -5 kB\n", 0, false},
		{"MemFree: 1 kB\n", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseMemTotal([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseMemTotal(%q) = %d, %v", tt.in, got, err)
		}
	}
}

func TestHostFacts(t *testing.T) {
	if n, err := MemTotal(); err != nil || n <= 0 {
		t.Errorf("MemTotal() = %d, %v", n, err)
	}
	if n, err := PIDMax(); err != nil || n <= 0 {
		t.Errorf("PIDMax() = %d, %v", n, err)
	}
}
