package native

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/astrabox/astrabox/internal/hostnet"
)

// The firewall of network mode unrestricted: a few iptables rules that
// match every box interface (abx+) at once, installed when the first such
// box starts and refreshed when the host's name servers change. They are
// host configuration, not per box: creating or deleting a box never
// touches them.
//
//	filter FORWARD  -i abx+ -j ASTRABOX-FORWARD; -o abx+ -j ASTRABOX-FORWARD
//	filter INPUT    -i abx+ -j ASTRABOX-INPUT
//	nat POSTROUTING -s NETWORK ! -o abx+ -j MASQUERADE
//
// ASTRABOX-FORWARD lets replies into boxes and rejects all else sent to
// them (from the outside or another box), lets boxes
// reach the host's name servers on port 53, rejects hostnet.BlockedRanges, and
// accepts the rest. ASTRABOX-INPUT lets replies reach the host and
// rejects everything a box sends to the host itself.
const (
	chainForward = "ASTRABOX-FORWARD"
	chainInput   = "ASTRABOX-INPUT"
)

// firewall installs the rules; one per process, shared by providers. It
// needs iptables-restore beside iptables (both come in one package).
type firewall struct {
	mu        sync.Mutex
	iptables  string
	installed map[netip.Prefix]string // network -> name servers it was set up with
	limited   bool                    // the rules of mode limited are installed (limited.go)
}

var hostFirewall = &firewall{installed: map[netip.Prefix]string{}}

// available reports whether the firewall can be installed on this host.
func (f *firewall) available() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.iptables == "" {
		if path, err := exec.LookPath("iptables"); err == nil {
			f.iptables = path
		}
	}
	return f.iptables != "" && os.Geteuid() == 0
}

// ensure installs (or refreshes) the rules for boxes of network that may
// reach servers for DNS, and turns on IPv4 forwarding.
func (f *firewall) ensure(network netip.Prefix, servers []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := fmt.Sprint(servers)
	if have, ok := f.installed[network]; ok && have == key && f.inPlace() {
		return nil
	}
	if f.iptables == "" {
		return fmt.Errorf("network unrestricted needs iptables, which is not installed")
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0); err != nil {
		return fmt.Errorf("enable IPv4 forwarding: %w", err)
	}
	var fwd [][]string
	fwd = append(fwd,
		[]string{"-o", hostIfPrefix + "+", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
		[]string{"-o", hostIfPrefix + "+", "-j", "REJECT", "--reject-with", "icmp-admin-prohibited"})
	for _, s := range servers {
		for _, proto := range []string{"udp", "tcp"} {
			fwd = append(fwd, []string{"-d", s.String(), "-p", proto, "--dport", "53", "-j", "ACCEPT"})
		}
	}
	for _, r := range hostnet.BlockedRanges {
		fwd = append(fwd, []string{"-d", r.String(), "-j", "REJECT", "--reject-with", "icmp-admin-prohibited"})
	}
	fwd = append(fwd, []string{"-j", "ACCEPT"})
	in := [][]string{
		{"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
		{"-j", "REJECT", "--reject-with", "icmp-admin-prohibited"},
	}
	// Both chains are refilled in one iptables-restore commit: a box that
	// is running meanwhile never meets an empty chain.
	if err := hostnet.Restore(context.Background(), f.iptables, "filter", map[string][][]string{chainForward: fwd, chainInput: in}); err != nil {
		return err
	}
	jumps := [][]string{
		{"filter", "FORWARD", "-i", hostIfPrefix + "+", "-j", chainForward},
		{"filter", "FORWARD", "-o", hostIfPrefix + "+", "-j", chainForward},
		{"filter", "INPUT", "-i", hostIfPrefix + "+", "-j", chainInput},
		{"nat", "POSTROUTING", "-s", network.String(), "!", "-o", hostIfPrefix + "+", "-j", "MASQUERADE"},
	}
	for _, j := range jumps {
		if err := f.jumpFirst(j[0], j[1], j[2:]...); err != nil {
			return err
		}
	}
	f.installed[network] = key
	return nil
}

// inPlace reports whether the jumps into the chains are still there: a
// firewall reload on the host may have removed them, and then they are
// installed again before another box starts.
func (f *firewall) inPlace() bool {
	_, errF := f.run("-t", "filter", "-C", "FORWARD", "-i", hostIfPrefix+"+", "-j", chainForward)
	_, errI := f.run("-t", "filter", "-C", "INPUT", "-i", hostIfPrefix+"+", "-j", chainInput)
	return errF == nil && errI == nil
}

// jumpFirst puts rule first in chain unless it is there already.
func (f *firewall) jumpFirst(table, chain string, rule ...string) error {
	if _, err := f.run(append([]string{"-t", table, "-C", chain}, rule...)...); err == nil {
		return nil
	}
	_, err := f.run(append([]string{"-t", table, "-I", chain, "1"}, rule...)...)
	return err
}

// run runs iptables, waiting for its lock, and returns its output.
func (f *firewall) run(args ...string) (string, error) {
	cmd := exec.Command(f.iptables, append([]string{"-w", "5"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
