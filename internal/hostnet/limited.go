package hostnet

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// LimitedRules are the host rules of network mode limited for the boxes
// behind the interfaces that Iface matches (an iptables interface name;
// a trailing "+" matches every name it begins). Both backends that offer
// the mode install them; each names its own chains and interfaces. Nothing
// such a box sends is forwarded: every TCP connection is redirected to
// ProxyPort and every DNS query (UDP and TCP port 53, to any address) to
// DNSPort, both on the address of the interface the packet came in on,
// where the box's egress gate listens (package egress). Everything else a
// box sends to the host is rejected. The rules fail closed: while no gate
// listens, a box's connections are refused and its queries unanswered.
//
//	nat    PREROUTING -i IFACE -j NAT:    DNS -> REDIRECT DNSPort; other TCP -> REDIRECT ProxyPort
//	filter INPUT      -i IFACE -j In:     replies; redirected connections to the two ports; REJECT
//	filter Forward    -i IFACE / -o IFACE -j Fwd: REJECT
//
// The chains are filled in one iptables-restore commit per table, so a box
// never meets an empty chain; the jumps are put first in their chains.
type LimitedRules struct {
	Iface string
	// NAT, In and Fwd name the rules' own chains (at most 28 characters).
	NAT, In, Fwd string
	// Forward is the filter chain that jumps to Fwd: FORWARD, or a chain
	// that FORWARD consults first (Docker's DOCKER-USER, which the engine
	// keeps at the head of FORWARD when it restarts).
	Forward            string
	ProxyPort, DNSPort int
}

var rejectRule = []string{"-j", "REJECT", "--reject-with", "icmp-admin-prohibited"}

// chains returns the rules' chains by table.
func (r LimitedRules) chains() map[string]map[string][][]string {
	accept := func(proto string, p int) []string {
		return []string{"-p", proto, "--dport", strconv.Itoa(p), "-m", "conntrack", "--ctstate", "DNAT", "-j", "ACCEPT"}
	}
	to := func(p int) []string { return []string{"-j", "REDIRECT", "--to-ports", strconv.Itoa(p)} }
	return map[string]map[string][][]string{
		"filter": {
			r.In: {
				{"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
				accept("tcp", r.ProxyPort), accept("tcp", r.DNSPort), accept("udp", r.DNSPort),
				rejectRule,
			},
			r.Fwd: {rejectRule},
		},
		"nat": {r.NAT: {
			append([]string{"-p", "udp", "--dport", "53"}, to(r.DNSPort)...),
			append([]string{"-p", "tcp", "--dport", "53"}, to(r.DNSPort)...),
			append([]string{"-p", "tcp"}, to(r.ProxyPort)...),
		}},
	}
}

// Jumps returns the jumps into the rules' chains, each as table, chain
// and rule.
func (r LimitedRules) Jumps() [][]string {
	return [][]string{
		{"filter", "INPUT", "-i", r.Iface, "-j", r.In},
		{"filter", r.Forward, "-i", r.Iface, "-j", r.Fwd},
		{"filter", r.Forward, "-o", r.Iface, "-j", r.Fwd},
		{"nat", "PREROUTING", "-i", r.Iface, "-j", r.NAT},
	}
}

// Install fills the chains and adds each jump that is missing, with the
// iptables command iptables (iptables-restore beside it). It is
// idempotent.
func (r LimitedRules) Install(ctx context.Context, iptables string) error {
	ch := r.chains()
	for _, table := range []string{"filter", "nat"} {
		if err := Restore(ctx, iptables, table, ch[table]); err != nil {
			return err
		}
	}
	for _, j := range r.Jumps() {
		if _, err := Iptables(ctx, iptables, append([]string{"-t", j[0], "-C", j[1]}, j[2:]...)...); err == nil {
			continue
		}
		if _, err := Iptables(ctx, iptables, append([]string{"-t", j[0], "-I", j[1], "1"}, j[2:]...)...); err != nil {
			return err
		}
	}
	return nil
}

// InPlace reports whether every jump is there (a firewall reload on the
// host may have removed them).
func (r LimitedRules) InPlace(ctx context.Context, iptables string) bool {
	for _, j := range r.Jumps() {
		if _, err := Iptables(ctx, iptables, append([]string{"-t", j[0], "-C", j[1]}, j[2:]...)...); err != nil {
			return false
		}
	}
	return true
}

// Remove deletes the jumps (every copy) and the chains; what is already
// gone is fine. The caller makes sure first that no box is behind Iface
// any more: without the rules such a box's packets would be forwarded.
func (r LimitedRules) Remove(ctx context.Context, iptables string) error {
	for _, j := range r.Jumps() {
		for {
			if _, err := Iptables(ctx, iptables, append([]string{"-t", j[0], "-D", j[1]}, j[2:]...)...); err != nil {
				break
			}
		}
	}
	var errs []string
	for table, chains := range r.chains() {
		for name := range chains {
			if _, err := Iptables(ctx, iptables, "-t", table, "-L", name, "-n"); err != nil {
				continue // not there
			}
			_, _ = Iptables(ctx, iptables, "-t", table, "-F", name)
			if _, err := Iptables(ctx, iptables, "-t", table, "-X", name); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove limited rules: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Iptables runs the iptables command iptables with args, waiting up to
// five seconds for its lock, and returns its output.
func Iptables(ctx context.Context, iptables string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, iptables, append([]string{"-w", "5"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
