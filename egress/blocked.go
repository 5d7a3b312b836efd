package egress

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/astrabox/astrabox/internal/hostnet"
)

// blockedV6 are the IPv6 ranges no box may reach through the proxy, beside
// hostnet.BlockedRanges (IPv4): unspecified, loopback, unique-local,
// link-local, site-local, multicast, documentation, NAT64 and 6to4 (both
// embed IPv4 addresses, private ones included), discard-only and Teredo.
var blockedV6 = []netip.Prefix{
	netip.MustParsePrefix("::/128"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fec0::/10"), netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"), netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("100::/64"), netip.MustParsePrefix("2001::/32"),
}

// blocker decides whether an address is off limits: in a blocked range
// or one of the host's own addresses, unless an opted-in range holds it.
// It is safe for concurrent use.
type blocker struct {
	allow []netip.Prefix // Config.AllowRanges

	mu      sync.Mutex
	local   []netip.Addr // the host's addresses
	readAt  time.Time
	addrsFn func() ([]net.Addr, error)
}

// localTTL is how long the host's address list is reused.
const localTTL = 10 * time.Second

func newBlocker(allow []netip.Prefix) *blocker {
	return &blocker{allow: allow, addrsFn: net.InterfaceAddrs}
}

// blocked reports whether a must not be reached, and why. An IPv4-mapped
// IPv6 address is judged as the IPv4 address it carries.
func (b *blocker) blocked(a netip.Addr) (bool, string) {
	a = a.Unmap()
	if !a.IsValid() {
		return true, "no address"
	}
	a = a.WithZone("")
	for _, p := range b.allow {
		if p.Contains(a) {
			return false, ""
		}
	}
	if a.Is4() && hostnet.Blocked(a) {
		return true, "a blocked range (host, metadata or private)"
	}
	if a.Is6() && slices.ContainsFunc(blockedV6, func(p netip.Prefix) bool { return p.Contains(a) }) {
		return true, "a blocked IPv6 range"
	}
	if slices.Contains(b.hostAddrs(), a) {
		return true, "an address of the host"
	}
	return false, ""
}

// hostAddrs returns the host's own addresses, read at most every localTTL.
func (b *blocker) hostAddrs() []netip.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.readAt.IsZero() || time.Since(b.readAt) > localTTL {
		b.readAt = time.Now()
		b.local = b.local[:0]
		if addrs, err := b.addrsFn(); err == nil {
			for _, ad := range addrs {
				if ipn, ok := ad.(*net.IPNet); ok {
					if a, ok := netip.AddrFromSlice(ipn.IP); ok {
						b.local = append(b.local, a.Unmap())
					}
				}
			}
		}
	}
	return b.local
}
