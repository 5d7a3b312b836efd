package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/astrabox/astrabox/egress/internal/syntax"
)

// The box's name server. It answers A queries for names the box's policy
// lets it resolve with the addresses the host's resolver gives, minus
// blocked ones; a name the policy hides, or one that resolves to blocked
// addresses only, does not exist (NXDOMAIN). AAAA and every other type get
// an empty answer (boxes of mode limited have IPv4 only). Each address
// answered is remembered for the name (answerTTL, and a while beyond), so
// that a connection the box opens to it without naming a host (neither
// TLS nor HTTP) is decided by that name.

const (
	answerTTL   = 30 // seconds
	maxAnswers  = 8
	cacheTTL    = 10 * time.Minute
	maxCacheIPs = 4096
	dnsTimeout  = 5 * time.Second
)

// answer builds the response to one DNS query; nil when query is not even
// a DNS header (then nothing is sent back).
func (b *Box) answer(ctx context.Context, query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	q, err := p.Question()
	if err != nil {
		resp.RCode = dnsmessage.RCodeFormatError
		return build(resp, nil, nil)
	}
	if h.OpCode != 0 {
		resp.RCode = dnsmessage.RCodeNotImplemented
		return build(resp, &q, nil)
	}
	if q.Class != dnsmessage.ClassINET {
		resp.RCode = dnsmessage.RCodeRefused
		return build(resp, &q, nil)
	}
	name, ok := syntax.HostName(q.Name.String())
	if !ok {
		name = strings.TrimSuffix(q.Name.String(), ".")
	}
	v := b.policy().Resolvable(name)
	if !v.Allow {
		b.refused("dns", name, netip.AddrPort{}, v.String())
		resp.RCode = dnsmessage.RCodeNameError
		return build(resp, &q, nil)
	}
	b.allowed("dns")
	if q.Type != dnsmessage.TypeA {
		return build(resp, &q, nil) // NODATA
	}
	addrs, err := b.resolve(ctx, name)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			resp.RCode = dnsmessage.RCodeNameError
		} else {
			resp.RCode = dnsmessage.RCodeServerFailure
		}
		return build(resp, &q, nil)
	}
	var v4 []netip.Addr
	for _, a := range addrs {
		if a.Is4() && len(v4) < maxAnswers {
			v4 = append(v4, a)
		}
	}
	b.remember(name, v4)
	return build(resp, &q, v4)
}

// build encodes a response; nil on an encoding error.
func build(h dnsmessage.Header, q *dnsmessage.Question, addrs []netip.Addr) []byte {
	bld := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	bld.EnableCompression()
	if q != nil {
		if bld.StartQuestions() != nil || bld.Question(*q) != nil {
			return nil
		}
		if len(addrs) > 0 {
			if bld.StartAnswers() != nil {
				return nil
			}
			for _, a := range addrs {
				rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: answerTTL}
				if bld.AResource(rh, dnsmessage.AResource{A: a.As4()}) != nil {
					return nil
				}
			}
		}
	}
	out, err := bld.Finish()
	if err != nil {
		return nil
	}
	return out
}

// resolve looks name up with the host's resolver and returns the addresses
// that are not blocked (unmapped), or an error naming why there are none.
func (b *Box) resolve(ctx context.Context, name string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, dnsTimeout)
	defer cancel()
	addrs, err := b.m.cfg.Resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	var why string
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if bad, reason := b.m.block.blocked(a); bad {
			why = a.String() + " is in " + reason
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		if why == "" {
			why = "no address"
		}
		return nil, &net.DNSError{Err: "resolves only to refused addresses (" + why + ")", Name: name, IsNotFound: true}
	}
	return out, nil
}

// dnsCache remembers which names the box was given each address for.
type dnsCache struct {
	mu sync.Mutex
	m  map[netip.Addr]map[string]time.Time // address -> name -> expiry
}

func (b *Box) remember(name string, addrs []netip.Addr) {
	c := &b.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.m == nil {
		c.m = map[netip.Addr]map[string]time.Time{}
	}
	if len(c.m) >= maxCacheIPs {
		for a, names := range c.m {
			for n, exp := range names {
				if now.After(exp) {
					delete(names, n)
				}
			}
			if len(names) == 0 {
				delete(c.m, a)
			}
		}
	}
	for _, a := range addrs {
		if len(c.m) >= maxCacheIPs && c.m[a] == nil {
			return
		}
		if c.m[a] == nil {
			c.m[a] = map[string]time.Time{}
		}
		c.m[a][name] = now.Add(cacheTTL)
	}
}

// namesFor returns the names the box was recently given a for.
func (b *Box) namesFor(a netip.Addr) []string {
	c := &b.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	now := time.Now()
	for n, exp := range c.m[a] {
		if now.Before(exp) {
			out = append(out, n)
		}
	}
	return out
}

// serveDNSPacket answers queries on a UDP socket until it is closed.
func (g *Gate) serveDNSPacket(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		ua, ok := from.(*net.UDPAddr)
		if !ok {
			continue
		}
		box := g.boxFor(ua.AddrPort().Addr())
		if box == nil {
			continue
		}
		query := append([]byte(nil), buf[:n]...)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), dnsTimeout)
			defer cancel()
			if resp := box.answer(ctx, query); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}()
	}
}

// serveDNSStream answers length-prefixed queries on one TCP connection.
func (g *Gate) serveDNSStream(c net.Conn) {
	defer c.Close()
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return
	}
	box := g.boxFor(ta.AddrPort().Addr())
	if box == nil {
		return
	}
	for {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), dnsTimeout)
		resp := box.answer(ctx, q)
		cancel()
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}
