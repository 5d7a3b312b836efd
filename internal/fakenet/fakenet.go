// Package fakenet runs a stand-in for the internet on the host: HTTP and
// HTTPS servers (and, if asked, a name server) in a network namespace of
// their own, reached from the host over a veth pair on a /30 of
// TEST-NET-3 (203.0.113.0/24), so that tests and benchmarks of boxes'
// networking never touch the real internet. It needs root and the ip
// command. The tests of network mode limited use it through
// egress/egresstest; `astrabox bench egress` uses it directly.
package fakenet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Config configures a stand-in.
type Config struct {
	// Prefix starts the name of the network namespace, which ends with a
	// number of the process (default "fakenet").
	Prefix string
	// Handler serves HTTP on port 80 and HTTPS on port 443 of the
	// server's address (r.TLS is set for HTTPS). Required.
	Handler http.Handler
	// Names are the server's names. When there are any, a name server on
	// UDP port 53 of the server's address answers them with that address
	// (an A record; any other name does not exist, any other type has no
	// answer), and so does Server.LookupNetIP.
	Names []string
}

// Server is a running stand-in: a public-looking address of its own (each
// process on one host gets another /30), HTTP on port 80 and HTTPS on 443
// with a certificate of its own CA for every name asked for by SNI.
type Server struct {
	Addr     netip.Addr // the server's address
	HostAddr netip.Addr // the host's end of the link
	CAPEM    []byte     // the servers' CA, for clients' trust
	Roots    *x509.CertPool

	ns, hostIf string
	names      map[string]netip.Addr
	closers    []func() error
	closeOnce  sync.Once
	closeErr   error
}

// lockPath is the file under whose lock a process picks its /30: other
// processes (tests of other packages, run in parallel; a benchmark) take
// it too, since two links on one range would route one process's traffic
// to the other's.
var lockPath = filepath.Join(os.TempDir(), "astrabox-egresstest.lock")

// Start makes the namespace and the link and starts the servers. Close
// removes all of it; on an error, Start has removed what it made.
func Start(cfg Config) (_ *Server, err error) {
	if cfg.Handler == nil {
		return nil, errors.New("fakenet: no handler")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "fakenet"
	}
	suffix := strconv.Itoa(os.Getpid() % 100000)
	s := &Server{ns: cfg.Prefix + "-" + suffix, hostIf: "xlim" + suffix, names: map[string]netip.Addr{}}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	unlock, err := lockFile(lockPath)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.link("xlimp" + suffix); err != nil {
		return nil, err
	}
	for _, name := range cfg.Names {
		s.names[strings.ToLower(strings.TrimSuffix(name, "."))] = s.Addr
	}
	caCert, caKey, err := newCA()
	if err != nil {
		return nil, err
	}
	s.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw})
	s.Roots = x509.NewCertPool()
	s.Roots.AddCert(caCert)
	var leaves sync.Map // name → *tls.Certificate
	tlsCfg := &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c, ok := leaves.Load(hi.ServerName); ok {
			return c.(*tls.Certificate), nil
		}
		c, err := leaf(caCert, caKey, hi.ServerName)
		if err == nil {
			leaves.Store(hi.ServerName, c)
		}
		return c, err
	}}
	var plain, secure net.Listener
	err = s.inNamespace(func() (err error) {
		if plain, err = net.Listen("tcp4", netip.AddrPortFrom(s.Addr, 80).String()); err != nil {
			return err
		}
		s.closers = append(s.closers, plain.Close)
		if secure, err = net.Listen("tcp4", netip.AddrPortFrom(s.Addr, 443).String()); err != nil {
			return err
		}
		s.closers = append(s.closers, secure.Close)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fakenet: listen: %w", err)
	}
	s1 := &http.Server{Handler: cfg.Handler, ReadHeaderTimeout: 10 * time.Second}
	s2 := &http.Server{Handler: cfg.Handler, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	go func() { _ = s1.Serve(plain) }()
	go func() { _ = s2.ServeTLS(secure, "", "") }()
	s.closers = append(s.closers, s1.Close, s2.Close)
	if len(cfg.Names) > 0 {
		var pc net.PacketConn
		err := s.inNamespace(func() (err error) {
			pc, err = net.ListenPacket("udp4", netip.AddrPortFrom(s.Addr, 53).String())
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("fakenet: name server: %w", err)
		}
		s.closers = append(s.closers, pc.Close)
		go s.serveDNS(pc)
	}
	return s, nil
}

// link picks a free /30 of TEST-NET-3 and makes the namespace with nsIf
// in it, routed through the host end.
func (s *Server) link(nsIf string) error {
	for i := range 64 {
		k := byte((os.Getpid() + i) % 64)
		host := netip.AddrFrom4([4]byte{203, 0, 113, 4*k + 1})
		has, err := hostHas(host)
		if err != nil {
			return err
		}
		if !has {
			s.HostAddr, s.Addr = host, host.Next()
			break
		}
	}
	if !s.Addr.IsValid() {
		return errors.New("fakenet: every /30 of 203.0.113.0/24 is in use on the host")
	}
	_ = exec.Command("ip", "link", "del", s.hostIf).Run()
	_ = exec.Command("ip", "netns", "del", s.ns).Run()
	if err := ip("netns", "add", s.ns); err != nil {
		return err
	}
	s.closers = append(s.closers, func() error {
		_ = exec.Command("ip", "link", "del", s.hostIf).Run() // gone with the namespace when its peer was moved
		return ip("netns", "del", s.ns)
	})
	for _, args := range [][]string{
		{"link", "add", s.hostIf, "type", "veth", "peer", "name", nsIf},
		{"link", "set", nsIf, "netns", s.ns},
		{"addr", "add", s.HostAddr.String() + "/30", "dev", s.hostIf},
		{"link", "set", s.hostIf, "up"},
		{"-n", s.ns, "addr", "add", s.Addr.String() + "/30", "dev", nsIf},
		{"-n", s.ns, "link", "set", nsIf, "up"},
		{"-n", s.ns, "link", "set", "lo", "up"},
		{"-n", s.ns, "route", "add", "default", "via", s.HostAddr.String()},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// Close stops the servers and removes the namespace and the link. It is
// safe to call more than once; later calls return the first one's error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for i := len(s.closers) - 1; i >= 0; i-- {
			if err := s.closers[i](); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// LookupNetIP answers the server's names with its address, as the host's resolver with an
// /etc/hosts naming the server would (it implements egress.Resolver).
func (s *Server) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := s.names[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// ip runs the ip command with args.
func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("fakenet: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lockFile takes an exclusive lock on path (made if missing) and returns
// its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fakenet: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("fakenet: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// hostHas reports whether a is an address of one of the host's interfaces.
func hostHas(a netip.Addr) (bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false, fmt.Errorf("fakenet: %w", err)
	}
	for _, ad := range addrs {
		if ipn, ok := ad.(*net.IPNet); ok {
			if b, ok := netip.AddrFromSlice(ipn.IP); ok && b.Unmap() == a {
				return true, nil
			}
		}
	}
	return false, nil
}

// inNamespace runs fn on a thread in the server's network namespace:
// sockets fn makes stay in it whichever thread serves them.
func (s *Server) inNamespace(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := netns.GetFromName(s.ns)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		panic("fakenet: cannot return to the process's network namespace: " + err.Error())
	}
	return ferr
}

func newCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("fakenet: CA key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fakenet upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("fakenet: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("fakenet: CA: %w", err)
	}
	return cert, key, nil
}

func leaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
