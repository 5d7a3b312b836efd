package native_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// connectProbe connects to argv[1]:argv[2] and prints "OK <first line the
// server sent>", or "FAIL <error class>" (exit 1).
const connectProbe = `python3 -c '
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
    print("OK", s.recv(100).decode().strip())
except Exception as e:
    print("FAIL", type(e).__name__); sys.exit(1)' `

// internet is a stand-in for a public server: a network namespace
// reached from the host over a veth pair, on TEST-NET-2 (198.51.100.0/24,
// which no firewall rule of the backend names), with a TCP server that
// answers each connection with the address it came from.
type internet struct {
	ns       string
	hostAddr string // the host's address on the link
	addr     string // the server's
	port     int
}

func newInternet(t *testing.T) *internet {
	t.Helper()
	testenv.NeedCommand(t, "ip")
	testenv.NeedCommand(t, "python3")
	n := &internet{ns: "abxtest-" + strconv.Itoa(os.Getpid()), hostAddr: "198.51.100.1", addr: "198.51.100.2", port: 8099}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", n.ns)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", "xnet0").Run()
		_ = exec.Command("ip", "netns", "del", n.ns).Run()
	})
	run("link", "add", "xnet0", "type", "veth", "peer", "name", "xnet1")
	run("link", "set", "xnet1", "netns", n.ns)
	run("addr", "add", n.hostAddr+"/24", "dev", "xnet0")
	run("link", "set", "xnet0", "up")
	run("-n", n.ns, "addr", "add", n.addr+"/24", "dev", "xnet1")
	run("-n", n.ns, "link", "set", "xnet1", "up")
	run("-n", n.ns, "link", "set", "lo", "up")
	srv := exec.Command("ip", "netns", "exec", n.ns, "python3", "-c", `
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8099)); s.listen(64); print("ready", flush=True)
while True:
    c, a = s.accept(); c.sendall((a[0] + "\n").encode()); c.close()`)
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("internet server: %q %v", line, err)
	}
	return n
}

// probe runs connectProbe in b and returns its output.
func probe(t *testing.T, b *sandboxtest.Box, host string, port int) string {
	t.Helper()
	_, out, errOut := sh(t, b, nil, fmt.Sprintf("%s %s %d", connectProbe, host, port))
	if out == "" {
		return "no output: " + errOut
	}
	return strings.TrimSpace(out)
}

// gateway returns the box's default gateway from /proc/net/route.
func gateway(t *testing.T, b *sandboxtest.Box) string {
	t.Helper()
	_, out, _ := sh(t, b, nil, `awk '$2 == "00000000" { print $3 }' /proc/net/route`)
	hex := strings.TrimSpace(out)
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil {
		t.Fatalf("no default route in the box: %q", out)
	}
	return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).String()
}

func TestNetworkUnrestricted(t *testing.T) {
	testenv.NeedCommand(t, "iptables")
	h := newHarness(t)
	if !h.p.Capabilities().Has(sandbox.CapNetworkUnrestricted) {
		t.Fatal("iptables is installed but the backend does not offer network unrestricted")
	}
	inet := newInternet(t)
	open := func(t *testing.T) *sandboxtest.Box {
		spec := h.Spec()
		spec.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkUnrestricted}
		return sandboxtest.NewBox(t, h, &spec)
	}
	a, b := open(t), open(t)

	// A host service on every address, which no box may reach.
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "host")
			c.Close()
		}
	}()
	hostPort := l.Addr().(*net.TCPAddr).Port
	_, bAddr, _ := sh(t, b, nil, `python3 -c 'import socket; s = socket.socket(); s.connect(("198.51.100.2", 8099)); print(s.getsockname()[0])'`)
	sh(t, b, nil, `(python3 -c '
import socket
s = socket.socket(); s.bind(("0.0.0.0", 8100)); s.listen(8)
while True:
    c, a = s.accept(); c.sendall(b"box-b\n"); c.close()' > /dev/null 2>&1 &) ; sleep 0.3`)

	tests := []struct {
		name, host string
		port       int
		reach      bool
	}{
		{"the internet, masqueraded as the host", inet.addr, inet.port, true},
		{"the host through the gateway", gateway(t, a), hostPort, false},
		{"the host by another of its addresses", inet.hostAddr, hostPort, false},
		{"cloud metadata", "169.254.169.254", 80, false},
		{"a private range", "192.168.1.1", 80, false},
		{"another box", strings.TrimSpace(bAddr), 8100, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := probe(t, a, tc.host, tc.port)
			if tc.reach && got != "OK "+inet.hostAddr {
				t.Fatalf("connect to %s:%d = %q, want OK from %s (the host's address: NAT)", tc.host, tc.port, got, inet.hostAddr)
			}
			if !tc.reach && !strings.HasPrefix(got, "FAIL") {
				t.Fatalf("connect to %s:%d = %q, want a failure", tc.host, tc.port, got)
			}
		})
	}
	if _, out, _ := sh(t, a, nil, "cat /etc/resolv.conf"); !strings.Contains(out, "nameserver") && !strings.Contains(out, "no name server") {
		t.Errorf("resolv.conf of an unrestricted box: %q", out)
	}

	// A box of mode none has loopback only; a deleted box's link is gone.
	none := sandboxtest.NewBox(t, h, nil)
	if _, out, _ := sh(t, none, nil, "ls /sys/class/net"); strings.TrimSpace(out) != "lo" {
		t.Fatalf("network none: interfaces %q", out)
	}
	before := hostLinks(t)
	if err := h.p.Delete(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for hostLinks(t) >= before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := hostLinks(t); got != before-1 {
		t.Fatalf("host box links: %d before delete, %d after", before, got)
	}
}

// hostLinks counts the host ends of box links.
func hostLinks(t *testing.T) int {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, "abx") {
			n++
		}
	}
	return n
}
