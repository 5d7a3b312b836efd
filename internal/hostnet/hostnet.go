// Package hostnet holds what the backends' networks share on the host:
// the ranges no sandbox may reach, the host's name servers (the one
// exception in mode unrestricted), atomic replacement of iptables chains,
// and the rules of mode limited (LimitedRules).
package hostnet

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// BlockedRanges are never reachable from a sandbox: "this network",
// private ranges (other sandboxes are in one), carrier-grade NAT (some
// clouds' metadata), loopback, link-local (cloud metadata at
// 169.254.169.254), the IETF protocol range, benchmarking, multicast and
// reserved space.
var BlockedRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// Blocked reports whether a lies in BlockedRanges.
func Blocked(a netip.Addr) bool {
	return slices.ContainsFunc(BlockedRanges, func(p netip.Prefix) bool { return p.Contains(a) })
}

// Nameservers returns the IPv4 name servers the host uses that a sandbox
// can reach through the host: from /etc/resolv.conf, or, when that names
// only a local stub (systemd-resolved), from the stub's upstream list.
func Nameservers() []netip.Addr {
	for _, f := range []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"} {
		if ns := ReadNameservers(f); len(ns) > 0 {
			return ns
		}
	}
	return nil
}

// ReadNameservers returns the IPv4, non-loopback, non-zero nameserver
// lines of a resolv.conf file, each once, in order (none when the file
// cannot be read).
func ReadNameservers(path string) []netip.Addr {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(fields[1])
		if err != nil || !a.Is4() || a.IsLoopback() || a.IsUnspecified() || slices.Contains(out, a) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// RestoreScript is the iptables-restore input that creates (or empties)
// each chain of table and appends its rules, in one commit; with
// --noflush no other chain is touched. Rule arguments must not contain
// spaces.
func RestoreScript(table string, chains map[string][][]string) string {
	names := make([]string, 0, len(chains))
	for name := range chains {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for _, name := range names {
		fmt.Fprintf(&b, ":%s - [0:0]\n", name)
	}
	for _, name := range names {
		for _, rule := range chains[name] {
			fmt.Fprintf(&b, "-A %s %s\n", name, strings.Join(rule, " "))
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Restore replaces chains of table atomically with the iptables-restore
// that sits beside the iptables command: a sandbox running meanwhile never
// meets an empty chain.
func Restore(ctx context.Context, iptables, table string, chains map[string][][]string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(iptables), "iptables-restore"), "-w", "5", "--noflush")
	cmd.Stdin = strings.NewReader(RestoreScript(table, chains))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore of %s %v: %w: %s", table, slices.Sorted(maps.Keys(chains)), err, strings.TrimSpace(string(out)))
	}
	return nil
}
