// Package egresstest holds what the tests of network mode limited share
// across backends: a stand-in for the internet (HTTP and HTTPS servers in
// a network namespace the test makes, reached over a veth pair, never the
// real internet) and a resolver that answers from a table, as the host's
// resolver with its /etc/hosts would. It needs root and the ip command.
package egresstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Request is what an upstream server saw of one request.
type Request struct {
	TLS           bool
	Host          string
	Path          string
	Authorization string
	APIKey        string // X-Api-Key
}

// Upstream is a public-looking server on a /30 of TEST-NET-3 of its own
// (test processes on one host each get another): HTTP on port 80 and
// HTTPS on 443 (a certificate of its own CA for every name), answering
// "ok <host>" and recording each request. Its answers never echo request
// headers, so a test can tell what reached it without the box seeing it.
type Upstream struct {
	Addr     netip.Addr // the server's address
	HostAddr netip.Addr // the host's end of the link
	CAPEM    []byte     // the servers' CA, for the proxy's (and boxes') trust
	Roots    *x509.CertPool

	mu   sync.Mutex
	reqs []Request
}

// Requests returns what the servers have seen so far.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Request(nil), u.reqs...)
}

// Last returns the last request seen for host, and whether there was one.
func (u *Upstream) Last(host string) (Request, bool) {
	reqs := u.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Host == host {
			return reqs[i], true
		}
	}
	return Request{}, false
}

// NewUpstream makes the namespace and link and starts the servers; all is
// removed when the test ends.
func NewUpstream(t testing.TB) *Upstream {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command")
	}
	suffix := strconv.Itoa(os.Getpid() % 100000)
	ns, hostIf, nsIf := "abltest-"+suffix, "xlim"+suffix, "xlimp"+suffix
	// The link's /30 is chosen under a lock that other test processes
	// (of other packages, run in parallel) take too: two links on one
	// range would route one process's upstream traffic to the other's.
	unlock := lockFile(t, filepath.Join(os.TempDir(), "astrabox-egresstest.lock"))
	defer unlock()
	u := &Upstream{}
	for i := range 64 {
		k := byte((os.Getpid() + i) % 64)
		host := netip.AddrFrom4([4]byte{203, 0, 113, 4*k + 1})
		if !hostHas(t, host) {
			u.HostAddr, u.Addr = host, host.Next()
			break
		}
	}
	if !u.Addr.IsValid() {
		t.Fatal("egresstest: every /30 of 203.0.113.0/24 is in use on the host")
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command("ip", "link", "del", hostIf).Run()
	_ = exec.Command("ip", "netns", "del", ns).Run()
	run("netns", "add", ns)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", hostIf).Run()
		_ = exec.Command("ip", "netns", "del", ns).Run()
	})
	run("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	run("link", "set", nsIf, "netns", ns)
	run("addr", "add", u.HostAddr.String()+"/30", "dev", hostIf)
	run("link", "set", hostIf, "up")
	run("-n", ns, "addr", "add", u.Addr.String()+"/30", "dev", nsIf)
	run("-n", ns, "link", "set", nsIf, "up")
	run("-n", ns, "link", "set", "lo", "up")
	run("-n", ns, "route", "add", "default", "via", u.HostAddr.String())

	caCert, caKey := newCA(t)
	u.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw})
	u.Roots = x509.NewCertPool()
	u.Roots.AddCert(caCert)
	tlsCfg := &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return leaf(caCert, caKey, hi.ServerName)
	}}
	plain, secure := listenIn(t, ns, u.Addr.String()+":80"), listenIn(t, ns, u.Addr.String()+":443")
	handler := func(isTLS bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			u.mu.Lock()
			u.reqs = append(u.reqs, Request{TLS: isTLS, Host: host, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), APIKey: r.Header.Get("X-Api-Key")})
			u.mu.Unlock()
			fmt.Fprintf(w, "ok %s\n", host)
		})
	}
	s1 := &http.Server{Handler: handler(false), ReadHeaderTimeout: 10 * time.Second}
	s2 := &http.Server{Handler: handler(true), ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	go func() { _ = s1.Serve(plain) }()
	go func() { _ = s2.ServeTLS(secure, "", "") }()
	t.Cleanup(func() { s1.Close(); s2.Close() })
	return u
}

// lockFile takes an exclusive lock on path (made if missing) and returns
// its release.
func lockFile(t testing.TB, path string) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() { f.Close() } // closing releases the lock
}

// hostHas reports whether a is an address of one of the host's interfaces.
func hostHas(t testing.TB, a netip.Addr) bool {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ad := range addrs {
		if ipn, ok := ad.(*net.IPNet); ok {
			if b, ok := netip.AddrFromSlice(ipn.IP); ok && b.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// listenIn listens on addr inside network namespace name; the socket
// stays in it whichever thread serves it.
func listenIn(t testing.TB, name, addr string) net.Listener {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		t.Fatal(err)
	}
	l, lerr := net.Listen("tcp4", addr)
	if err := netns.Set(orig); err != nil {
		panic("cannot return to the test's network namespace: " + err.Error())
	}
	if lerr != nil {
		t.Fatal(lerr)
	}
	return l
}

func newCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egresstest upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
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

// Resolver answers from a table: each name has a list of answers given in
// turn (the last one repeats), as a DNS-rebinding server gives them.
type Resolver struct {
	mu    sync.Mutex
	names map[string][][]netip.Addr
	calls map[string]int
}

// NewResolver returns an empty Resolver.
func NewResolver() *Resolver {
	return &Resolver{names: map[string][][]netip.Addr{}, calls: map[string]int{}}
}

// Set gives name its answers, one per argument.
func (r *Resolver) Set(name string, answers ...netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := make([][]netip.Addr, len(answers))
	for i, a := range answers {
		seq[i] = []netip.Addr{a}
	}
	r.names[name] = seq
	r.calls[name] = 0
}

// LookupNetIP implements egress.Resolver.
func (r *Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := r.names[strings.ToLower(host)]
	if len(seq) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.calls[host], len(seq)-1)
	r.calls[host]++
	return seq[i], nil
}
