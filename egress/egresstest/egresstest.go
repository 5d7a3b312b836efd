// Package egresstest holds what the tests of network mode limited share
// across backends: a stand-in for the internet (HTTP and HTTPS servers in
// a network namespace the test makes, reached over a veth pair, never the
// real internet: package fakenet, recording what reaches it) and a
// resolver that answers from a table, as the host's resolver with its
// /etc/hosts would. It needs root and the ip command.
package egresstest

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/internal/fakenet"
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

// NewUpstream makes the namespace and link and starts the servers
// (package fakenet); all is removed when the test ends. It skips the test
// without root or the ip command.
func NewUpstream(t testing.TB) *Upstream {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command")
	}
	u := &Upstream{}
	s, err := fakenet.Start(fakenet.Config{Prefix: "abltest", Handler: http.HandlerFunc(u.serve)})
	if err != nil {
		t.Fatalf("egresstest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("egresstest: %v", err)
		}
	})
	u.Addr, u.HostAddr, u.CAPEM, u.Roots = s.Addr, s.HostAddr, s.CAPEM, s.Roots
	return u
}

// serve records the request and answers "ok <host>", or, with the query
// parameter echo, "echo" and the request's Authorization and X-Api-Key in
// the body and in response headers: a destination that reflects what it
// got, whose answer must reach the box scrubbed of credentials.
func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	u.mu.Lock()
	u.reqs = append(u.reqs, Request{TLS: r.TLS != nil, Host: host, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), APIKey: r.Header.Get("X-Api-Key")})
	u.mu.Unlock()
	if r.URL.Query().Has("echo") {
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "echo Authorization=%q X-Api-Key=%q\n", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
		return
	}
	fmt.Fprintf(w, "ok %s\n", host)
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

// ScanScript is a shell command (python3 in the box) that looks for secret
// everywhere a box could hold it: the environment, command line and
// readable memory of every process, and the files under the usual
// directories. Its output is "regions N found [...]"; see ScanClean.
func ScanScript(secret string) string {
	return strings.Replace(scanScript, "NEEDLE", hex.EncodeToString([]byte(secret)), 1)
}

// ScanClean reports whether the output of ScanScript found nothing after
// reading some memory (a scan that could read no memory proves nothing).
func ScanClean(out string) bool {
	return strings.Contains(out, "found []") && !strings.Contains(out, "regions 0 ")
}

const scanScript = `python3 - <<'EOF'
import os
needle = bytes.fromhex("NEEDLE")
found, regions = [], 0
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    for f in ("environ", "cmdline"):
        try:
            if needle in open(f"/proc/{pid}/{f}", "rb").read(): found.append(f"{pid}/{f}")
        except OSError: pass
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", 0)
    except OSError:
        continue
    for line in maps:
        addr, perms = line.split()[:2]
        if not perms.startswith("r"): continue
        lo, hi = (int(x, 16) for x in addr.split("-"))
        if hi - lo > 1 << 30: continue
        try:
            mem.seek(lo); data = mem.read(hi - lo); regions += 1
        except (OSError, ValueError, OverflowError):
            continue
        if needle in data: found.append(f"{pid}/mem")
for top in ("/etc", "/tmp", "/root", "/home", "/var", "/run", "/workspace"):
    for d, _, files in os.walk(top):
        for n in files:
            try:
                if needle in open(os.path.join(d, n), "rb").read(): found.append(os.path.join(d, n))
            except OSError: pass
print("regions", regions, "found", found)
EOF`
