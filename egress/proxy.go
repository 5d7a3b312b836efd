package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/egress/internal/syntax"
)

// handle serves one connection a box opened: the read-only egress API on
// the box's gateway, or the proxy.
func (g *Gate) handle(c net.Conn) {
	defer c.Close()
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return
	}
	box := g.boxFor(ta.AddrPort().Addr())
	if box == nil {
		return
	}
	orig, err := originalDst(c)
	if err != nil {
		box.log.Warn("egress: no original destination", "err", err)
		return
	}
	if orig.Addr() == g.cfg.Gateway && orig.Port() == InBoxAPIPort {
		box.serveInBoxAPI(c)
		return
	}
	box.proxy(c, orig)
}

// originalDst is where the box meant c to go before the backend redirected
// it (SO_ORIGINAL_DST).
func originalDst(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var mreq *unix.IPv6Mreq
	var serr error
	if err := raw.Control(func(fd uintptr) {
		mreq, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, fmt.Errorf("SO_ORIGINAL_DST: %w", serr)
	}
	m := mreq.Multiaddr // a sockaddr_in: family, port, address
	port := uint16(m[2])<<8 | uint16(m[3])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{m[4], m[5], m[6], m[7]}), port), nil
}

// sniffed is what the proxy learnt from a connection's first bytes.
type sniffed struct {
	buf   []byte // everything read so far, to replay upstream
	proto protocol
	name  string     // the host the box named (normalized), "" if none
	ip    netip.Addr // a Host that was an IP literal
	head  *httpHead  // HTTP: the request head
}

// sniff reads c's first bytes until they name a host, are known to name
// none, or SniffTimeout passes without any.
func (b *Box) sniff(c net.Conn) sniffed {
	var s sniffed
	deadline := time.Now().Add(b.m.cfg.SniffTimeout)
	tmp := make([]byte, 16<<10)
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	for len(s.buf) < maxSniff {
		_ = c.SetReadDeadline(deadline)
		n, err := c.Read(tmp)
		s.buf = append(s.buf, tmp[:n]...)
		if len(s.buf) > 0 {
			s.proto = classify(s.buf)
			switch s.proto {
			case protoTLS:
				sni, perr := clientHelloSNI(s.buf)
				if perr == errNeedMore && err == nil {
					break
				}
				if perr == nil {
					s.name, _ = syntax.HostName(sni)
				}
				return s
			case protoHTTP:
				h, perr := readHTTPHead(s.buf)
				if perr == errNeedMore && err == nil {
					break
				}
				if perr == nil {
					s.head = &h
					if name, ip, ok := hostName(h.req.Host); ok {
						s.name, s.ip = name, ip
					}
				} else {
					s.proto = protoOther
				}
				return s
			default:
				return s
			}
		}
		if err != nil {
			return s
		}
		// A deadline once data came only guards against a box that
		// trickles: the whole header must come within a few seconds.
		if time.Until(deadline) < time.Second {
			deadline = time.Now().Add(5 * time.Second)
		}
	}
	return s
}

// choice is the proxy's decision on one connection.
type choice struct {
	dst    netip.AddrPort // where to connect
	name   string         // the name it was allowed for ("" by address)
	reason string         // why not, when dst is not valid
}

// decide picks the upstream of a connection to orig: by the name the box
// sent, resolved by the proxy; or else, for a protocol that names no host,
// by the names the box's DNS answers gave orig; or else by orig itself.
func (b *Box) decide(ctx context.Context, s sniffed, orig netip.AddrPort) choice {
	pol := b.policy()
	port := int(orig.Port())
	if s.name != "" {
		addrs, err := b.resolve(ctx, s.name)
		if err != nil {
			v := pol.Decide(s.name, netip.Addr{}, port)
			if !v.Allow {
				return choice{reason: v.String()}
			}
			return choice{reason: "cannot resolve: " + err.Error()}
		}
		var pick netip.Addr
		var last Verdict
		for _, a := range addrs {
			if v := pol.Decide(s.name, a, port); v.Allow {
				if !pick.IsValid() || a == orig.Addr() {
					pick = a
				}
			} else {
				last = v
			}
		}
		if !pick.IsValid() {
			return choice{reason: last.String()}
		}
		return choice{dst: netip.AddrPortFrom(pick, orig.Port()), name: s.name}
	}
	dst := orig
	if s.ip.IsValid() {
		dst = netip.AddrPortFrom(s.ip, orig.Port())
	}
	if bad, why := b.m.block.blocked(dst.Addr()); bad {
		return choice{reason: dst.Addr().String() + " is in " + why}
	}
	// A protocol that names no host (neither TLS nor HTTP) goes where the
	// box's DNS answers for an allowed name pointed it; TLS and HTTP must
	// name an allowed host, or reach an allowed address.
	if s.proto == protoOther {
		for _, n := range b.namesFor(dst.Addr()) {
			if v := pol.Decide(n, dst.Addr(), port); v.Allow {
				return choice{dst: dst, name: n}
			}
		}
	}
	if v := pol.Decide("", dst.Addr(), port); !v.Allow {
		return choice{reason: v.String()}
	}
	return choice{dst: dst}
}

// proxy decides and carries one connection of the box.
func (b *Box) proxy(c net.Conn, orig netip.AddrPort) {
	s := b.sniff(c)
	ctx, cancel := context.WithTimeout(context.Background(), b.m.cfg.DialTimeout+dnsTimeout)
	ch := b.decide(ctx, s, orig)
	if !ch.dst.IsValid() {
		cancel()
		b.refused("tcp", s.name, orig, ch.reason)
		if s.proto == protoHTTP && s.head != nil {
			refusePage(c, s.head.req.Host, ch.reason)
		}
		return
	}
	if s.proto == protoTLS && ch.name != "" && b.intercepts(ch.name, int(ch.dst.Port())) {
		cancel()
		b.allowed("tcp")
		b.intercept(c, s, ch)
		return
	}
	if s.proto == protoHTTP && s.head != nil && b.relaysHTTP(ch.name, int(ch.dst.Port())) {
		cancel()
		b.allowed("tcp")
		b.serveHTTP(c, s, ch)
		return
	}
	up, err := b.m.cfg.Dial(ctx, "tcp", ch.dst.String())
	cancel()
	if err != nil {
		b.refused("tcp", s.name, ch.dst, "connect: "+err.Error())
		if s.proto == protoHTTP && s.head != nil {
			refusePage(c, s.head.req.Host, "the upstream cannot be reached")
		}
		return
	}
	defer up.Close()
	b.allowed("tcp")
	if len(s.buf) > 0 {
		if _, err := up.Write(s.buf); err != nil {
			return
		}
	}
	splice(c, up)
}

// splice copies both ways until both directions end, passing half-closes.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// badGateway answers the box's request with a 502 carrying msg and ends
// the connection.
func badGateway(c net.Conn, msg string) {
	body := msg + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

// refusePage answers an HTTP request the policy refused. It names the host
// and the reason, nothing else (never a credential).
func refusePage(c net.Conn, host, reason string) {
	body := "AstraBox egress: " + strconv.Quote(host) + " is not reachable from this sandbox: " + reason + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}
