// Package opensandbox is the sandbox backend that is itself a lifecycle
// service: an OpenSandbox deployment (Docker or Kubernetes), or another
// AstraBox server (`astrabox serve` with its own backends), driven through
// the OpenSandbox lifecycle API (sandbox-lifecycle.yml) with plain
// net/http and the wire types of package api/wire. Any number of them may
// be configured, each under a name of its own.
//
// Boxes. Create posts a sandbox to the remote with the Spec's image,
// entrypoint, environment, limits (resourceLimits), network policy and
// expiry, and two metadata labels: LabelOwner (Config.Owner, naming the
// owning AstraBox) and LabelID (the box id this server knows it by; the
// remote has ids of its own). The labels are the backend's only record:
// Inspect, List (the orphan sweep) and Attach find a box by them, so a
// restarted server, or a second Provider with the same Owner, reaches the
// boxes of the first; the state blob caches the remote id. Create is
// idempotent on the id (an existing labelled box is returned; the post
// carries an Idempotency-Key too); Delete returns when the remote no
// longer has the box. Renew (sandbox.Renewer) forwards renewals, so the
// remote's expiry stays the server's.
//
// State mapping: the remote's states are the same closed enum and are
// taken as they are, but for Terminated, which is a box that is gone
// (ErrNotFound), and for a state this package does not know, which is
// Failed with the remote's word for it.
//
// Reaching execd. The remote hands out, for each box, an endpoint for
// execd's port 44772: a URL (through its server proxy, or a signed route,
// or a direct address, whichever it offers; Config.Endpoint) and headers
// every request must carry. sandbox.Provider.Dial must return a net.Conn
// that speaks execd's HTTP API, and every caller (the lifecycle service,
// the API's port proxy, the platform's runner, the conformance suite)
// builds an HTTP client on that Dial. Rather than widen that contract with
// a second, URL-based way for one backend, Dial returns one end of an
// in-memory pipe whose other end is served, in this process, by a reverse
// proxy to the box's endpoint: it checks the box's access token, replaces
// it with the endpoint's headers, and passes requests, SSE streams
// (unbuffered) and upgraded connections (WebSocket terminals, tunnels)
// through. Callers are unchanged, and the one extra hop is in memory.
//
// The access token of a box (Info.AccessToken) authenticates calls through
// Dial only, never to the remote: it is an HMAC of the box id under a key
// derived from the API key and the owner, so every Provider with the same
// configuration computes the same one and the state blob holds no secret.
//
// Capabilities are what the lifecycle API can express (network none,
// limited and unrestricted; cpu and memory limits, with pids and disk for
// an AstraBox remote, which the probe recognises; pause; ports; pty), less
// what the remote has refused: a create the remote refuses for a
// capability is refused with the remote's reason, naming it, and from then
// on Capabilities no longer lists the capability, so the server refuses it
// before anything starts. Health asks the remote's /health and then its
// lifecycle API with the key; a background probe (Config.ProbeInterval)
// keeps the last answer, logs its changes, and lets Create refuse at once
// while the remote is down.
//
// The API key is held in memory only: it is sent as OPEN-SANDBOX-API-KEY
// to the remote's own host (never to a direct endpoint of another host),
// and no error, log line or String of this package shows it.
package opensandbox

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// Metadata labels on every box this backend creates on a remote.
const (
	// LabelOwner names the AstraBox that owns the box (Config.Owner).
	LabelOwner = "astrabox.io/owner"
	// LabelID is the box id the owning AstraBox knows the box by.
	LabelID = "astrabox.io/id"
)

// Endpoint modes (Config.Endpoint).
const (
	// EndpointAuto asks for the server-proxied endpoint, then a signed
	// one, then whatever the remote gives by default.
	EndpointAuto = "auto"
	// EndpointProxy asks for the server-proxied endpoint only.
	EndpointProxy = "proxy"
	// EndpointSigned asks for a signed, expiring route only.
	EndpointSigned = "signed"
	// EndpointDirect takes the remote's default (often a direct address).
	EndpointDirect = "direct"
)

// Config configures one remote.
type Config struct {
	// Name is the backend's name on this server (the key of its section
	// in the config file). Required.
	Name string
	// URL is the remote lifecycle service, e.g. "http://host:8080"; the
	// API is under URL/v1. Required.
	URL string
	// APIKey is sent as OPEN-SANDBOX-API-KEY (empty: the remote serves
	// without authentication).
	APIKey string
	// Owner is the value of LabelOwner on every box this backend creates,
	// so that servers sharing a remote never take each other's boxes for
	// orphans; replicas of one server set the same. Required: 1 to 63
	// letters, digits, '-', '_' or '.', starting and ending with a letter
	// or digit (a Kubernetes label value).
	Owner string
	// Backend names the remote's backend boxes go to (an AstraBox remote
	// with several; sent as extensions.backend). Empty: the remote's
	// default.
	Backend string
	// Isolation is what the remote's boxes give (it cannot be asked);
	// default container.
	Isolation sandbox.Isolation
	// Endpoint chooses how execd is reached (EndpointAuto by default).
	Endpoint string
	// ProbeInterval is how often the background probe asks the remote
	// (default 10 s; negative: no background probe).
	ProbeInterval time.Duration
	// StartTimeout bounds waiting for a new box to be Running (default
	// 2 minutes).
	StartTimeout time.Duration
	// HTTPClient reaches the remote (default: a pooled client of its own).
	HTTPClient *http.Client
	// Logger receives operational logs.
	Logger *slog.Logger
}

// Provider is one remote lifecycle service as a sandbox backend. It is
// safe for concurrent use. Close stops its probe.
type Provider struct {
	cfg     Config
	base    *url.URL
	hc      *http.Client
	log     *slog.Logger
	tokKey  []byte
	proxy   *pipeProxy
	stop    context.CancelFunc
	stopped chan struct{}

	mu        sync.Mutex
	remote    map[string]string // box id -> remote id
	locks     map[string]*sync.Mutex
	endpoints map[string]endpoint // remote id -> execd endpoint
	refused   map[sandbox.Capability]string
	health    sandbox.Health
	checked   time.Time
	astrabox  bool // the remote answered AstraBox's additions
}

// New checks cfg and returns a Provider, and starts its probe. It does not
// wait for the remote: Health says whether it answers.
func New(cfg Config) (*Provider, error) {
	if cfg.Name == "" {
		return nil, errors.New("opensandbox: Name is required")
	}
	u, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("opensandbox %s: url %q: want http(s)://host[:port][/path] without credentials or query", cfg.Name, cfg.URL)
	}
	if !validLabelValue(cfg.Owner) {
		return nil, fmt.Errorf("opensandbox %s: owner %q: want 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", cfg.Name, cfg.Owner)
	}
	switch cfg.Endpoint {
	case "":
		cfg.Endpoint = EndpointAuto
	case EndpointAuto, EndpointProxy, EndpointSigned, EndpointDirect:
	default:
		return nil, fmt.Errorf("opensandbox %s: endpoint %q: want auto, proxy, signed or direct", cfg.Name, cfg.Endpoint)
	}
	switch cfg.Isolation {
	case "":
		cfg.Isolation = sandbox.IsolationContainer
	case sandbox.IsolationNone, sandbox.IsolationContainer, sandbox.IsolationSandboxed, sandbox.IsolationVM:
	default:
		return nil, fmt.Errorf("opensandbox %s: isolation %q: want none, container, sandboxed or vm", cfg.Name, cfg.Isolation)
	}
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = 10 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
			DisableCompression: true, ForceAttemptHTTP2: true,
		}}
	}
	mac := hmac.New(sha256.New, []byte("astrabox opensandbox execd token"))
	mac.Write([]byte(cfg.APIKey + "\x00" + cfg.Owner + "\x00" + u.String()))
	p := &Provider{
		cfg: cfg, base: u, hc: cfg.HTTPClient, log: cfg.Logger, tokKey: mac.Sum(nil),
		remote: map[string]string{}, locks: map[string]*sync.Mutex{}, endpoints: map[string]endpoint{},
		refused: map[sandbox.Capability]string{}, stopped: make(chan struct{}),
		health: sandbox.Health{Status: sandbox.Unhealthy, Reason: "remote " + cfg.Name + " not probed yet"},
	}
	p.proxy = newPipeProxy(p)
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	go p.probeLoop(ctx)
	return p, nil
}

// Close stops the background probe and the in-process proxy; boxes keep
// running on the remote. Connections Dial returned are closed.
func (p *Provider) Close() error {
	p.stop()
	<-p.stopped
	return p.proxy.close()
}

// Name implements sandbox.Provider: the name of this remote's section.
func (p *Provider) Name() string { return p.cfg.Name }

// String names the remote without its key.
func (p *Provider) String() string { return "opensandbox " + p.cfg.Name + " (" + p.base.String() + ")" }

// Capabilities implements sandbox.Provider: what the lifecycle API can
// express, less what the remote refused (see the package doc).
func (p *Provider) Capabilities() sandbox.Capabilities {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := sandbox.Capabilities{
		Isolation: p.cfg.Isolation,
		Limits:    []sandbox.Resource{sandbox.ResourceCPU, sandbox.ResourceMemory},
		Pause:     p.refused[sandbox.CapPause] == "",
		Ports:     p.refused[sandbox.CapPorts] == "",
		PTY:       p.refused[sandbox.CapPTY] == "",
	}
	if p.astrabox {
		c.Limits = append(c.Limits, sandbox.ResourcePIDs, sandbox.ResourceDisk)
	}
	c.NetworkModes = []sandbox.NetworkMode{sandbox.NetworkNone}
	if p.refused[sandbox.CapNetworkLimited] == "" {
		c.NetworkModes = append(c.NetworkModes, sandbox.NetworkLimited)
	}
	if p.refused[sandbox.CapNetworkUnrestricted] == "" {
		c.NetworkModes = append(c.NetworkModes, sandbox.NetworkUnrestricted)
	}
	return c
}

// Instance implements sandbox.Instancer: "opensandbox:URL:OWNER". Every
// replica with the same remote and owner serves one instance.
func (p *Provider) Instance(ctx context.Context) (string, error) {
	return "opensandbox:" + p.base.String() + ":" + p.cfg.Owner, nil
}

// token is the access token of box id (see the package doc).
func (p *Provider) token(id string) string {
	mac := hmac.New(sha256.New, p.tokKey)
	mac.Write([]byte(id))
	return hex.EncodeToString(mac.Sum(nil))
}

// lock serialises operations on one box id.
func (p *Provider) lock(id string) func() {
	p.mu.Lock()
	l, ok := p.locks[id]
	if !ok {
		l = &sync.Mutex{}
		p.locks[id] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// validLabelValue accepts Kubernetes label values (which OpenSandbox
// requires of metadata), not empty.
func validLabelValue(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !alnum && ((c != '-' && c != '_' && c != '.') || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// validID accepts the box ids this backend can put in a label.
func validID(id string) error {
	if !validLabelValue(id) {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid sandbox id %q", id)
	}
	return nil
}

var (
	_ sandbox.Provider  = (*Provider)(nil)
	_ sandbox.Instancer = (*Provider)(nil)
)
