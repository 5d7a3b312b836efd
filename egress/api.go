package egress

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// The egress API's policy view (OpenSandbox egress-api.yaml, /policy),
// shared by the box's endpoint on port 18080 (package api, which may
// change it) and the read-only copy served inside the box on its
// gateway's port 18080.

// WirePolicy is OpenSandbox's NetworkPolicy.
type WirePolicy struct {
	DefaultAction string                `json:"defaultAction"`
	Egress        []sandbox.NetworkRule `json:"egress"`
}

// PolicyStatus is OpenSandbox's PolicyStatusResponse.
type PolicyStatus struct {
	Status          string      `json:"status"`
	Mode            string      `json:"mode"`
	EnforcementMode string      `json:"enforcementMode"`
	Reason          string      `json:"reason,omitempty"`
	Policy          *WirePolicy `json:"policy,omitempty"`
}

// EnforcementMode names how AstraBox enforces a limited policy: its DNS
// server and its proxy of every TCP connection.
const EnforcementMode = "dns+proxy"

// Status is the PolicyStatusResponse of np.
func Status(np sandbox.NetworkPolicy) PolicyStatus {
	wp := ToWire(np)
	mode := "deny_all"
	if wp.DefaultAction == "allow" {
		mode = "allow_all"
	}
	return PolicyStatus{Status: "ok", Mode: mode, EnforcementMode: EnforcementMode, Policy: &wp}
}

// ToWire is np as OpenSandbox's NetworkPolicy: mode none is deny with no
// rules, unrestricted allow with none.
func ToWire(np sandbox.NetworkPolicy) WirePolicy {
	switch np.Mode {
	case sandbox.NetworkUnrestricted:
		return WirePolicy{DefaultAction: "allow", Egress: []sandbox.NetworkRule{}}
	case sandbox.NetworkLimited:
		da := np.DefaultAction
		if da == "" {
			da = "deny"
		}
		rules := EffectiveRules(np)
		if rules == nil {
			rules = []sandbox.NetworkRule{}
		}
		return WirePolicy{DefaultAction: da, Egress: rules}
	}
	return WirePolicy{DefaultAction: "deny", Egress: []sandbox.NetworkRule{}}
}

// serveInBoxAPI answers the box's own requests on its gateway's port
// 18080: GET /policy shows the policy; nothing changes it from there. The
// credential proxy's Credential Vault is not served there at all, not even its sanitized
// state (binding names, hosts and header names would show code in the box
// where credentials go): every /credential-vault request is refused.
func (b *Box) serveInBoxAPI(c net.Conn) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /policy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Status(b.Policy()))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/credential-vault" || strings.HasPrefix(r.URL.Path, "/credential-vault/") {
			http.Error(w, "the Credential Vault is not reachable from inside the sandbox: manage it through the sandbox's endpoint for port 18080, with its endpoint headers", http.StatusForbidden)
			return
		}
		if r.URL.Path == "/policy" {
			http.Error(w, "the egress policy is read-only from inside the sandbox: change it through the sandbox's endpoint for port 18080, with its endpoint headers", http.StatusForbidden)
			return
		}
		http.NotFound(w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	l := &oneConn{c: c, done: make(chan struct{})}
	_ = srv.Serve(l)
	<-l.done
}

// oneConn is a listener that yields one connection, then blocks until that
// connection is closed.
type oneConn struct {
	mu   sync.Mutex
	c    net.Conn
	done chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return &closeNotify{Conn: c, done: l.done}, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return &net.TCPAddr{} }

type closeNotify struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *closeNotify) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}
