package vault

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "master.key")
	r, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	sealed, err := r.Seal([]byte("sk-secret"), "profile:a")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "sk-secret") || !IsSealed(sealed) {
		t.Fatalf("sealed value %q", sealed)
	}
	again, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		value   string
		aad     string
		want    string
		wantErr bool
	}{
		{"same ring after reload", sealed, "profile:a", "sk-secret", false},
		{"other record", sealed, "profile:b", "", true},
		{"tampered", sealed[:len(sealed)-2] + "AA", "profile:a", "", true},
		{"not sealed", "sk-plain", "profile:a", "", true},
		{"truncated", prefix + "00", "profile:a", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := again.Open(tc.value, tc.aad)
			if (err != nil) != tc.wantErr || string(got) != tc.want {
				t.Fatalf("Open = %q, %v; want %q, err %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "sk-secret") {
				t.Fatalf("error leaks the secret: %v", err)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	old := make([]byte, 32)
	newer := make([]byte, 32)
	newer[0] = 1
	r1, _ := New(old)
	sealed, _ := r1.Seal([]byte("v"), "x")
	r2, err := New(newer, old)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r2.Open(sealed, "x"); err != nil || string(got) != "v" {
		t.Fatalf("open after rotation = %q, %v", got, err)
	}
	if !r2.NeedsReseal(sealed) {
		t.Fatal("a value under the old key should need re-sealing")
	}
	r3, _ := New(newer)
	if _, err := r3.Open(sealed, "x"); err != ErrNoKey {
		t.Fatalf("open without the old key = %v, want ErrNoKey", err)
	}
}

func TestRefusesOpenKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "master.key")
	if err := os.WriteFile(path, []byte(strings.Repeat("ab", 32)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(path); err == nil {
		t.Fatal("a world-readable key file was accepted")
	}
}

func FuzzOpen(f *testing.F) {
	r, _ := New(make([]byte, 32))
	s, _ := r.Seal([]byte("x"), "a")
	f.Add(s)
	f.Add(prefix + "zz:@@")
	f.Fuzz(func(t *testing.T, v string) {
		_, _ = r.Open(v, "a")
	})
}

func TestDerive(t *testing.T) {
	a, _ := New(make([]byte, 32))
	b, _ := New(make([]byte, 32))
	other := make([]byte, 32)
	other[0] = 1
	c, _ := New(other)
	if string(a.Derive("x")) != string(b.Derive("x")) || len(a.Derive("x")) != 32 {
		t.Fatal("the same key file must derive the same key")
	}
	if string(a.Derive("x")) == string(a.Derive("y")) || string(a.Derive("x")) == string(c.Derive("x")) {
		t.Fatal("derived keys must differ by purpose and by master key")
	}
}
