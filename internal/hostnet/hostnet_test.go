package hostnet

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestReadNameservers(t *testing.T) {
	tests := []struct {
		name, conf string
		want       []string
	}{
		{"plain", "nameserver 10.0.0.2\nnameserver 1.1.1.1\n", []string{"10.0.0.2", "1.1.1.1"}},
		{"stub only", "# systemd-resolved\nnameserver 127.0.0.53\noptions edns0\n", nil},
		{"IPv6, zero, repeats and junk left out", "nameserver ::1\nnameserver 0.0.0.0\nnameserver 8.8.8.8\nnameserver 8.8.8.8\nnameserver\nnameserver bogus\nsearch x\n", []string{"8.8.8.8"}},
		{"empty", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "resolv.conf")
			if err := os.WriteFile(path, []byte(tc.conf), 0o644); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range ReadNameservers(path) {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := ReadNameservers(filepath.Join(t.TempDir(), "missing")); got != nil {
		t.Fatalf("missing file: %v", got)
	}
}

func TestBlocked(t *testing.T) {
	for addr, want := range map[string]bool{
		"169.254.169.254": true, "10.201.0.2": true, "192.168.1.1": true, "172.31.255.255": true, "100.64.0.1": true,
		"127.0.0.1": true, "224.0.0.1": true, "1.1.1.1": false, "198.51.100.2": false, "172.32.0.1": false,
	} {
		if got := Blocked(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Blocked(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestRestoreScript(t *testing.T) {
	got := RestoreScript("filter", map[string][][]string{
		"B": {{"-j", "ACCEPT"}},
		"A": {{"-d", "10.0.0.0/8", "-j", "REJECT"}, {"-j", "RETURN"}},
	})
	want := "*filter\n:A - [0:0]\n:B - [0:0]\n-A A -d 10.0.0.0/8 -j REJECT\n-A A -j RETURN\n-A B -j ACCEPT\nCOMMIT\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
