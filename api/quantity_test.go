package api

import "testing"

func TestParseQuantities(t *testing.T) {
	cpu := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"500m", 500, true}, {"2", 2000, true}, {"0.25", 250, true}, {"1.5", 1500, true},
		{"0", 0, false}, {"-1", 0, false}, {"m", 0, false}, {"abc", 0, false}, {"NaN", 0, false}, {"1e9", 0, false},
	}
	for _, tt := range cpu {
		got, err := ParseCPU(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseCPU(%q) = %d, %v", tt.in, got, err)
		}
	}
	mem := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"512Mi", 512 << 20, true}, {"1Gi", 1 << 30, true}, {"1G", 1e9, true}, {"100", 100, true}, {"1.5Gi", 3 << 29, true},
		{"0", 0, false}, {"-5Mi", 0, false}, {"Mi", 0, false}, {"12XB", 0, false}, {"Inf", 0, false}, {"9999999Ti", 0, false},
	}
	for _, tt := range mem {
		got, err := ParseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v", tt.in, got, err)
		}
	}
}

func FuzzParseQuantities(f *testing.F) {
	f.Add("512Mi")
	f.Add("250m")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseBytes(s); err == nil && n <= 0 {
			t.Fatalf("ParseBytes(%q) = %d without error", s, n)
		}
		if n, err := ParseCPU(s); err == nil && n <= 0 {
			t.Fatalf("ParseCPU(%q) = %d without error", s, n)
		}
	})
}
