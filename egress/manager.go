package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/egress/trust"
	"github.com/astrabox/astrabox/internal/metrics"
	"github.com/astrabox/astrabox/sandbox"
)

// Resolver resolves names as the host does (*net.Resolver satisfies it:
// the host's /etc/hosts and resolv.conf, split-horizon DNS included).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Manager.
type Config struct {
	// Resolver resolves the names boxes ask for (default net.DefaultResolver).
	Resolver Resolver
	// AllowRanges opt addresses back in that the blocked ranges (private,
	// link-local, loopback, the host's own...) would refuse: a rule must
	// still allow them.
	AllowRanges []netip.Prefix
	// Dial opens upstream connections (default a net.Dialer with
	// DialTimeout); the address is always an IP and port.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTimeout bounds connecting upstream (default 10s).
	DialTimeout time.Duration
	// SniffTimeout is how long the proxy waits for a connection's first
	// bytes before deciding it without a name (default 1s: protocols where
	// the server speaks first wait this long).
	SniffTimeout time.Duration
	// CA signs the certificates the proxy presents when it terminates TLS
	// for protected delivery (nil: no interception).
	CA *trust.CA
	// RootCAs verifies upstream servers of intercepted connections
	// (default: the host's roots).
	RootCAs *x509.CertPool
	Logger  *slog.Logger
}

// Manager holds the egress proxies of one server: gates (listeners) and
// the boxes behind them. It is safe for concurrent use.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	block *blocker

	mu    sync.Mutex
	boxes map[string]*Box
	gates map[*Gate]bool

	// bindings are the boxes' credential proxy bindings by box id
	// ([]Binding; see SetBindings).
	bindings sync.Map
}

// NewManager returns a Manager.
func NewManager(cfg Config) *Manager {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.SniffTimeout <= 0 {
		cfg.SniffTimeout = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, block: newBlocker(cfg.AllowRanges), boxes: map[string]*Box{}, gates: map[*Gate]bool{}}
	if m.cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout, Control: m.dialControl}
		m.cfg.Dial = d.DialContext
	}
	return m
}

// dialControl refuses, as the socket connects, an address that is blocked:
// a second check under the one the proxy made when it chose the address.
func (m *Manager) dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress dial %s: %w", address, err)
	}
	if bad, why := m.block.blocked(ap.Addr()); bad {
		return fmt.Errorf("egress dial %s: in %s", address, why)
	}
	return nil
}

// Box returns the box id's proxy state, or nil.
func (m *Manager) Box(id string) *Box {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.boxes[id]
}

// CA returns the CA the proxy terminates TLS with for protected delivery
// (nil when the Manager has none: secrets then reach only plain HTTP).
func (m *Manager) CA() *trust.CA { return m.cfg.CA }

// CredentialProxyCA returns the CA certificate (PEM) a box created with
// credentialProxy must trust; CAPABILITY_NOT_SUPPORTED when the Manager
// has no CA to terminate TLS with.
func (m *Manager) CredentialProxyCA() ([]byte, error) {
	if m.cfg.CA == nil {
		return nil, sandbox.Errorf(sandbox.CodeCapability, "credentialProxy: the egress proxy has no CA to terminate TLS with")
	}
	return m.cfg.CA.CertPEM(), nil
}

// Close closes every gate (and so every box's proxy).
func (m *Manager) Close() {
	m.mu.Lock()
	gates := make([]*Gate, 0, len(m.gates))
	for g := range m.gates {
		gates = append(gates, g)
	}
	m.mu.Unlock()
	for _, g := range gates {
		_ = g.Close()
	}
}

// GateConfig names a gate's listeners.
type GateConfig struct {
	// Proxy is where the backend redirects the boxes' TCP connections.
	Proxy netip.AddrPort
	// DNS is where the boxes' DNS queries go (UDP and TCP).
	DNS netip.AddrPort
	// Gateway is the address the boxes see as theirs: connections to its
	// port 18080 get the read-only egress API.
	Gateway netip.Addr
	// FreeBind binds the listeners before the address exists on the host
	// (IP_FREEBIND), so that they can open before the box's link does.
	FreeBind bool
}

// InBoxAPIPort is the port of the egress API, on the box's gateway inside
// the box (read-only) and on the box's endpoint (see the api package).
const InBoxAPIPort = 18080

// Gate is the listeners on the host side of a network of boxes: a TCP
// proxy and a DNS server. Each connection belongs to the box whose address
// it comes from; connections from any other address are dropped.
type Gate struct {
	m    *Manager
	cfg  GateConfig
	tcp  net.Listener
	dns  net.Listener
	udp  net.PacketConn
	wg   sync.WaitGroup
	mu   sync.Mutex
	byIP map[netip.Addr]*Box
	done atomic.Bool
}

// OpenGate opens a gate's listeners and serves them until Close.
func (m *Manager) OpenGate(cfg GateConfig) (*Gate, error) {
	lc := net.ListenConfig{}
	if cfg.FreeBind {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_FREEBIND, 1)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	ctx := context.Background()
	g := &Gate{m: m, cfg: cfg, byIP: map[netip.Addr]*Box{}}
	var err error
	if g.tcp, err = lc.Listen(ctx, "tcp4", cfg.Proxy.String()); err != nil {
		return nil, fmt.Errorf("egress proxy listen %s: %w", cfg.Proxy, err)
	}
	if g.dns, err = lc.Listen(ctx, "tcp4", cfg.DNS.String()); err != nil {
		g.tcp.Close()
		return nil, fmt.Errorf("egress dns listen %s: %w", cfg.DNS, err)
	}
	if g.udp, err = lc.ListenPacket(ctx, "udp4", cfg.DNS.String()); err != nil {
		g.tcp.Close()
		g.dns.Close()
		return nil, fmt.Errorf("egress dns listen %s/udp: %w", cfg.DNS, err)
	}
	m.mu.Lock()
	m.gates[g] = true
	m.mu.Unlock()
	g.wg.Add(3)
	go func() { defer g.wg.Done(); g.acceptLoop(g.tcp, g.handle) }()
	go func() { defer g.wg.Done(); g.acceptLoop(g.dns, g.serveDNSStream) }()
	go func() { defer g.wg.Done(); g.serveDNSPacket(g.udp) }()
	return g, nil
}

func (g *Gate) acceptLoop(l net.Listener, serve func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		go serve(c)
	}
}

// Close stops the gate's listeners and removes its boxes (their open
// connections end as they end).
func (g *Gate) Close() error {
	if g.done.Swap(true) {
		return nil
	}
	g.tcp.Close()
	g.dns.Close()
	g.udp.Close()
	g.wg.Wait()
	g.mu.Lock()
	boxes := g.byIP
	g.byIP = map[netip.Addr]*Box{}
	g.mu.Unlock()
	g.m.mu.Lock()
	delete(g.m.gates, g)
	for _, b := range boxes {
		if g.m.boxes[b.id] == b {
			delete(g.m.boxes, b.id)
		}
	}
	g.m.mu.Unlock()
	return nil
}

// Closed reports whether the gate has been closed (by Close, or by the
// Manager's Close): a backend that keeps a gate opens a new one then.
func (g *Gate) Closed() bool { return g.done.Load() }

// Add puts box id, whose connections come from addr, behind the gate
// with policy np (see sandbox.NetworkPolicy). A box of that id elsewhere
// is replaced.
func (g *Gate) Add(id string, addr netip.Addr, np sandbox.NetworkPolicy) (*Box, error) {
	pol, err := Compile(np)
	if err != nil {
		return nil, err
	}
	b := &Box{id: id, m: g.m, gate: g, addr: addr.Unmap(), log: g.m.log.With("sandbox_id", id)}
	b.pol.Store(&boxPolicy{spec: np, compiled: pol})
	g.mu.Lock()
	g.byIP[b.addr] = b
	g.mu.Unlock()
	g.m.mu.Lock()
	g.m.boxes[id] = b
	g.m.mu.Unlock()
	return b, nil
}

// Remove takes box id from behind the gate.
func (g *Gate) Remove(id string) {
	g.mu.Lock()
	for a, b := range g.byIP {
		if b.id == id {
			delete(g.byIP, a)
		}
	}
	g.mu.Unlock()
	g.m.mu.Lock()
	if b := g.m.boxes[id]; b != nil && b.gate == g {
		delete(g.m.boxes, id)
	}
	g.m.mu.Unlock()
}

func (g *Gate) boxFor(a netip.Addr) *Box {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byIP[a.Unmap()]
}

// Box is one box's egress state: its policy, its DNS answers, its
// secrets for protected delivery, its counters.
type Box struct {
	id   string
	m    *Manager
	gate *Gate
	addr netip.Addr
	log  *slog.Logger

	pol     atomic.Pointer[boxPolicy]
	secrets atomic.Pointer[[]Secret]
	scrub   atomic.Pointer[scrubCache] // see scrubberFor
	cache   dnsCache

	Allowed, Refused atomic.Int64 // connections and lookups
}

type boxPolicy struct {
	spec     sandbox.NetworkPolicy
	compiled *Policy
}

func (b *Box) policy() *Policy { return b.pol.Load().compiled }

// Policy returns the box's current policy.
func (b *Box) Policy() sandbox.NetworkPolicy { return b.pol.Load().spec }

// SetPolicy replaces the box's policy; it applies to every connection and
// lookup from the moment it returns (connections already open stay).
func (b *Box) SetPolicy(np sandbox.NetworkPolicy) error {
	if err := Validate(np); err != nil {
		return err
	}
	pol, err := Compile(np)
	if err != nil {
		return err
	}
	b.pol.Store(&boxPolicy{spec: np, compiled: pol})
	b.log.Info("egress policy changed", "rules", len(pol.rules), "default_allow", pol.defaultAllow)
	return nil
}

// refused logs and counts a refusal.
func (b *Box) refused(kind, name string, dst netip.AddrPort, why string) {
	b.Refused.Add(1)
	metrics.EgressDecisions.Inc(kind, "refused")
	attrs := []any{"kind", kind, "reason", why}
	if name != "" {
		attrs = append(attrs, "name", name)
	}
	if dst.IsValid() {
		attrs = append(attrs, "dest", dst.String())
	}
	b.log.Info("egress refused", attrs...)
}

// allowed counts a connection let through (a lookup allowed is counted
// for the metrics only).
func (b *Box) allowed(kind string) {
	if kind != "dns" {
		b.Allowed.Add(1)
	}
	metrics.EgressDecisions.Inc(kind, "allowed")
}

// tlsConfig is the upstream TLS configuration of intercepted connections.
func (m *Manager) tlsConfig(name string) *tls.Config {
	return &tls.Config{ServerName: name, RootCAs: m.cfg.RootCAs, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}
