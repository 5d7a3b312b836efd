package native

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Network mode unrestricted. Each such box gets a veth pair: "eth0" in the
// box, "abx<slot>" on the host, addressed from a /30 of the backend's
// network (derived from the box's uid slot, so no allocator is needed).
// The host routes and masquerades the box's traffic; the firewall (see
// firewall.go) rejects what the box must not reach: the host itself,
// cloud metadata and link-local addresses, private and shared ranges
// (other boxes included), except the host's DNS servers on port 53.
// Boxes of mode none have no interface but loopback.

// DefaultNetwork is the range boxes with network unrestricted are
// addressed from: 4 addresses per uid slot.
const DefaultNetwork = "10.201.0.0/16"

// hostIfPrefix starts the name of every host-side veth of a box.
const hostIfPrefix = "abx"

// boxLink is the addressing of one box's veth pair.
type boxLink struct {
	hostIf string
	hostIP netip.Addr // the box's gateway
	boxIP  netip.Addr
}

// linkFor returns the addressing of the box in slot within network.
func linkFor(network netip.Prefix, slot int) (boxLink, error) {
	if !network.Addr().Is4() {
		return boxLink{}, fmt.Errorf("box network %s: want an IPv4 range", network)
	}
	size := 1 << (32 - network.Bits())
	if slot < 0 || (slot+1)*4 > size {
		return boxLink{}, fmt.Errorf("box network %s has no room for uid slot %d (needs a larger range)", network, slot)
	}
	base := network.Masked().Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += uint32(slot) * 4
	at := func(off uint32) netip.Addr {
		v := n + off
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return boxLink{hostIf: hostIfPrefix + strconv.Itoa(slot), hostIP: at(1), boxIP: at(2)}, nil
}

// plugNetwork gives the box whose init is pid its veth pair: eth0 up with
// its address and a default route through the host end. It runs before
// init is released, so no code of the box runs without it.
func (p *Provider) plugNetwork(pid int, l boxLink) error {
	unplug(l.hostIf) // a previous box of this slot may not be gone yet
	attrs := netlink.NewLinkAttrs()
	attrs.Name = l.hostIf
	attrs.MTU = p.mtu
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: "eth0", PeerNamespace: netlink.NsPid(pid)}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", l.hostIf, err)
	}
	host, err := netlink.LinkByName(l.hostIf)
	if err != nil {
		return fmt.Errorf("find veth %s: %w", l.hostIf, err)
	}
	// No IPv6 on the host end: the box must not reach the host by a
	// link-local address that the IPv4 firewall does not see.
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+l.hostIf+"/disable_ipv6", []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disable IPv6 on %s: %w", l.hostIf, err)
	}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: ipNet(l.hostIP, 30)}); err != nil {
		return fmt.Errorf("address %s: %w", l.hostIf, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("bring up %s: %w", l.hostIf, err)
	}
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return fmt.Errorf("box network namespace: %w", err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("box network namespace: %w", err)
	}
	defer h.Close()
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("find eth0 in the box: %w", err)
	}
	if err := h.AddrAdd(eth0, &netlink.Addr{IPNet: ipNet(l.boxIP, 30)}); err != nil {
		return fmt.Errorf("address eth0: %w", err)
	}
	if err := h.LinkSetUp(eth0); err != nil {
		return fmt.Errorf("bring up eth0: %w", err)
	}
	gw := net.IP(l.hostIP.AsSlice())
	if err := h.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	return nil
}

// unplug removes the host end of a veth pair (and with it the box end),
// if it exists.
func unplug(hostIf string) {
	if l, err := netlink.LinkByName(hostIf); err == nil {
		_ = netlink.LinkDel(l)
	}
}

func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}

// uplinkMTU is the MTU of the host's default route's interface (1500 when
// there is none), so that boxes do not send packets the uplink must
// fragment.
func uplinkMTU() int {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return 1500
	}
	for _, r := range routes {
		if r.Dst != nil && r.Dst.String() != "0.0.0.0/0" {
			continue
		}
		if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil && l.Attrs().MTU > 0 {
			return l.Attrs().MTU
		}
	}
	return 1500
}

// resolvConf is a box's /etc/resolv.conf for its network mode.
func resolvConf(unrestricted bool, servers []netip.Addr) string {
	if !unrestricted {
		return "# network mode none: no resolver\n"
	}
	if len(servers) == 0 {
		return "# the host has no name server a sandbox can reach\n"
	}
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	b.WriteString("options edns0\n")
	return b.String()
}
