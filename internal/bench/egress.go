package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/trust"
	execdclient "github.com/astrabox/astrabox/execd/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/backends"
	"github.com/astrabox/astrabox/internal/fakenet"
	"github.com/astrabox/astrabox/sandbox"
)

// EgressConfig configures the egress bench (`astrabox bench egress`).
// Zero fields take the defaults named.
type EgressConfig struct {
	// Backends are the sandbox backends measured, in order: "native"
	// (default) and "docker" (needs DockerImage).
	Backends []string
	// Binary is the static astrabox binary boxes run as execd. Required.
	Binary string
	// Dir is a scratch directory (the backends' state), traversable by
	// the users boxes run as; the caller removes it. Required.
	Dir string
	// DockerImage is the image of the docker backend's boxes, present in
	// the engine, with python3.
	DockerImage string
	// N is the number of samples of each latency (default 200).
	N int
	// Size is the bytes of each download (default 256 MiB).
	Size int64
	// Repeat is the number of rounds (default 3): each latency's N
	// samples are taken in Repeat rounds and each download is made Repeat
	// times (the median rate is reported), the two boxes taking turns, so
	// that what else the host does meanwhile weighs on both modes alike.
	Repeat int
	// Progress receives a line per step.
	Progress io.Writer
}

func (c EgressConfig) withDefaults() EgressConfig {
	if len(c.Backends) == 0 {
		c.Backends = []string{"native"}
	}
	if c.N <= 0 {
		c.N = 200
	}
	if c.Size <= 0 {
		c.Size = 256 << 20
	}
	if c.Repeat <= 0 {
		c.Repeat = 3
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// egressName is the upstream's name: the limited box's policy allows it,
// and the proxy's resolver and the stand-in's name server answer it.
const egressName = "upstream.bench.test"

// In-box paths of the client and of the CAs it trusts: the upstream's,
// and in the credential box the egress proxy's too.
const (
	egressClientPath = "/tmp/astrabox-bench-egress.py"
	egressCAPath     = "/tmp/astrabox-bench-upstream-ca.pem"
)

// The credential box's secret: its placeholder is what the client sends,
// the value what the upstream gets.
const (
	egressPlaceholder = "abx-bench-placeholder-5d1f0c7a9e3b"
	egressSecretValue = "bench-secret-value-8c2e4a6f1b3d"
)

// egressScenario is one row of the egress bench per backend.
type egressScenario struct {
	name, mode, scheme string
}

var egressScenarios = []egressScenario{
	{"GET, a new connection each (HTTP)", "fresh", "http"},
	{"GET, one kept-alive connection (HTTP)", "keepalive", "http"},
	{"GET, a new connection each (HTTPS)", "fresh", "https"},
	{"GET, one kept-alive connection (HTTPS)", "keepalive", "https"},
	{"DNS lookup (A, UDP)", "dns", "dns"},
	{"download (HTTP)", "download", "http"},
	{"download (HTTPS)", "download", "https"},
}

// RunEgress measures what network mode limited costs a box's traffic
// against mode unrestricted, in one run: per backend, one box of each
// mode, the limited one allowed egressName only, reach the same upstream
// (package fakenet: servers in a network namespace the bench makes, on
// TEST-NET-3, never the real internet) and time, with an in-box python3
// client (egressClientPy), small GETs on a new connection each and on one
// kept-alive connection over HTTP and HTTPS, A lookups (in limited mode
// answered by the proxy's name server, in unrestricted by the upstream's),
// and one download of Size bytes over each. The limited box's proxy is an
// egress.Manager of the bench's own, resolving names from the upstream's
// table; a third box, limited too, has a secret for the upstream's name
// and sends its placeholder, so that the proxy relays its requests one by
// one (HTTPS terminated with the bench's CA, which that box trusts),
// delivers the value and scrubs each response (all but the lookups).
// Needs root. Everything it made (boxes,
// the namespace and link, the backends' host rules) is removed, also
// after a failure, when what was measured is returned with the error.
func RunEgress(ctx context.Context, cfg EgressConfig) (EgressReport, error) {
	cfg = cfg.withDefaults()
	rep := EgressReport{Date: time.Now(), Machine: machine(),
		Settings: fmt.Sprintf("%s; n %d in %d rounds, %d downloads of %s", strings.Join(cfg.Backends, ", "), cfg.N, min(cfg.Repeat, cfg.N), cfg.Repeat, sizeString(cfg.Size))}
	if os.Geteuid() != 0 {
		return rep, errors.New("bench: the egress bench needs root (a network namespace, the backends' networks)")
	}
	if cfg.Binary == "" || cfg.Dir == "" {
		return rep, errors.New("bench: the egress bench needs the astrabox binary and a scratch directory")
	}
	for _, b := range cfg.Backends {
		if b != "native" && b != "docker" {
			return rep, fmt.Errorf("bench: egress: unknown backend %q (known: native, docker)", b)
		}
		if b == "docker" && cfg.DockerImage == "" {
			return rep, errors.New("bench: egress: the docker backend needs an image with python3 (--docker-image)")
		}
	}
	err := runEgress(ctx, cfg, &rep)
	if left := filesUnder(cfg.Dir); left > 0 {
		err = errors.Join(err, fmt.Errorf("bench: egress: %d files are left in the backends' data dirs", left))
	}
	return rep, err
}

// filesUnder counts what is under dir other than directories.
func filesUnder(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// runEgress runs the bench into rep; it removes what it made (an error
// doing so is returned too) before it returns.
func runEgress(ctx context.Context, cfg EgressConfig, rep *EgressReport) (err error) {
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }
	upstream := &egressUpstream{}
	up, err := fakenet.Start(fakenet.Config{Prefix: "ablbench", Handler: http.HandlerFunc(upstream.serve), Names: []string{egressName}})
	if err != nil {
		return fmt.Errorf("bench: upstream: %w", err)
	}
	defer func() {
		if cerr := up.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("bench: upstream: %w", cerr))
		}
	}()
	ca, _, err := trust.NewCA()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	m := egress.NewManager(egress.Config{Resolver: up, CA: ca, RootCAs: up.Roots, Logger: discardLogger()})
	defer m.Close()
	progress("upstream %s at %s, in a network namespace of its own", egressName, up.Addr)
	for _, backend := range cfg.Backends {
		if err := egressOn(ctx, cfg, backend, up, upstream, m, ca, rep, progress); err != nil {
			return err
		}
	}
	return nil
}

// closingProvider is a backend the bench closes when done.
type closingProvider interface {
	sandbox.Provider
	Close() error
}

// egressProvider makes backend with its state under cfg.Dir, serving
// network limited with m; it returns the image and resources of its boxes.
func egressProvider(cfg EgressConfig, backend string, m *egress.Manager) (closingProvider, string, sandbox.Resources, error) {
	var (
		section backends.Config
		image   string
		res     = sandbox.Resources{MemoryBytes: 1 << 30}
	)
	switch backend {
	case "native":
		section.Native.CgroupParent = fmt.Sprintf("astrabox-bench-%d", os.Getpid())
		image, res.DiskBytes = "host", 512<<20
	case "docker":
		image = cfg.DockerImage
	default:
		return nil, "", sandbox.Resources{}, fmt.Errorf("bench: egress: unknown backend %q", backend)
	}
	p, err := section.Open(backend, backends.Env{DataDir: cfg.Dir, Binary: cfg.Binary, Egress: m, Logger: discardLogger()})
	if err != nil {
		return nil, "", sandbox.Resources{}, fmt.Errorf("bench: %s backend: %w", backend, err)
	}
	cp, ok := p.(closingProvider)
	if !ok {
		return nil, "", sandbox.Resources{}, fmt.Errorf("bench: %s backend cannot be closed", backend)
	}
	return cp, image, res, nil
}

// egressBox is a box of one network mode with its execd client.
type egressBox struct {
	id string
	c  *execdclient.Client
}

// egressOn measures backend: a box of each mode, every scenario on both
// (in rounds, the boxes taking turns), row by row. It deletes its boxes
// and closes the backend (an error doing so is returned too) before it
// returns.
func egressOn(ctx context.Context, cfg EgressConfig, backend string, up *fakenet.Server, upstream *egressUpstream, m *egress.Manager, ca *trust.CA, rep *EgressReport, progress func(string, ...any)) (err error) {
	p, image, res, err := egressProvider(cfg, backend, m)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := p.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("bench: %s: close: %w", backend, cerr))
		}
	}()
	caps := p.Capabilities()
	if !caps.Has(sandbox.CapNetworkUnrestricted) || !caps.Has(sandbox.CapNetworkLimited) {
		return fmt.Errorf("bench: egress: the %s backend offers network modes %v here, not both unrestricted and limited (iptables?)", backend, caps.NetworkModes)
	}
	// The boxes: unrestricted; limited; limited with a secret for the
	// upstream's name, whose requests the proxy relays one by one (over
	// HTTPS terminating the box's TLS with its CA), putting the value in
	// and scrubbing it out of each response.
	limited := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Rules: []sandbox.NetworkRule{{Action: "allow", Target: egressName}}}
	kinds := []struct {
		label  string
		policy sandbox.NetworkPolicy
		secret bool
	}{{"unrestricted", sandbox.NetworkPolicy{Mode: sandbox.NetworkUnrestricted}, false}, {"limited", limited, false}, {"limited with a credential", limited, true}}
	var boxes [3]egressBox
	for i, k := range kinds {
		id := fmt.Sprintf("bench-egress-%d-%d", i, time.Now().UnixNano())
		progress("%s: creating a box of network %s", backend, k.label)
		info, cerr := p.Create(ctx, id, sandbox.Spec{Image: image, Resources: res, Network: k.policy})
		defer func() { // err is egressOn's result
			if derr := p.Delete(context.WithoutCancel(ctx), id); derr != nil {
				err = errors.Join(err, fmt.Errorf("bench: %s: delete box %s: %w", backend, id, derr))
			}
		}()
		if cerr != nil {
			return fmt.Errorf("bench: %s: create a box of network %s: %w", backend, k.label, cerr)
		}
		c := connect(p, info)
		if err := c.WaitReady(ctx); err != nil {
			return fmt.Errorf("bench: %s: box of network %s: %w", backend, k.label, err)
		}
		trust := up.CAPEM
		if k.secret {
			pb := m.Box(id)
			if pb == nil {
				return fmt.Errorf("bench: %s: the box of network %s is not behind the bench's egress proxy", backend, k.label)
			}
			pb.SetSecrets([]egress.Secret{{Name: "bench", Placeholder: egressPlaceholder, Value: egressSecretValue, Host: egressName}})
			trust = append(append([]byte(nil), up.CAPEM...), ca.CertPEM()...)
		}
		for path, data := range map[string][]byte{egressClientPath: []byte(egressClientPy), egressCAPath: trust} {
			if err := c.WriteFile(ctx, path, data, 0o644); err != nil {
				return fmt.Errorf("bench: %s: write %s in the box: %w", backend, path, err)
			}
		}
		boxes[i] = egressBox{id: id, c: c}
	}
	for _, sc := range egressScenarios {
		// A lookup does not depend on credentials: two boxes.
		n := len(boxes)
		if sc.mode == "dns" {
			n = 2
		}
		progress("%s: %s, in %d boxes", backend, sc.name, n)
		got := make([][]int64, len(boxes))
		for r, count := range egressRounds(sc, cfg) {
			for k := range n {
				i := (k + r) % n // the boxes take turns at going first
				auth := ""
				if kinds[i].secret {
					auth = "Bearer " + egressPlaceholder
				}
				vs, err := runEgressClient(ctx, boxes[i].c, sc, up.Addr.String(), count, auth)
				if err != nil {
					return fmt.Errorf("bench: %s: %s, network %s: %w", backend, sc.name, kinds[i].label, err)
				}
				got[i] = append(got[i], vs...)
			}
		}
		rep.Rows = append(rep.Rows, egressRow(sc, backend, got[0], got[1], got[2]))
	}
	if seen := upstream.auth.Load(); seen == nil || *seen != "Bearer "+egressSecretValue {
		return fmt.Errorf("bench: %s: the upstream did not get the credential box's secret", backend)
	}
	for _, i := range []int{1, 2} {
		lb := m.Box(boxes[i].id)
		if lb == nil || lb.Allowed.Load() == 0 {
			return fmt.Errorf("bench: %s: the traffic of the box of network %s did not go through its egress proxy", backend, kinds[i].label)
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s: the proxy of the box of network %s allowed %d connections and lookups and refused %d",
			backend, kinds[i].label, lb.Allowed.Load(), lb.Refused.Load()))
	}
	return nil
}

// egressRounds returns the count of each round of sc: cfg.Repeat
// downloads of cfg.Size bytes, or cfg.N samples shared out over at most
// cfg.Repeat rounds.
func egressRounds(sc egressScenario, cfg EgressConfig) []int64 {
	var out []int64
	if sc.mode == "download" {
		for range cfg.Repeat {
			out = append(out, cfg.Size)
		}
		return out
	}
	rounds := min(cfg.Repeat, cfg.N)
	for r := range rounds {
		k := cfg.N / rounds
		if r < cfg.N%rounds {
			k++
		}
		out = append(out, int64(k))
	}
	return out
}

// runEgressClient runs the in-box client for sc and returns its samples;
// auth, when not empty, is sent as every request's Authorization.
func runEgressClient(ctx context.Context, c *execdclient.Client, sc egressScenario, addr string, count int64, auth string) ([]int64, error) {
	scheme := sc.scheme
	if scheme == "dns" {
		scheme = "http" // unused by the dns mode
	}
	args := []string{"python3", egressClientPath, sc.mode, scheme, addr, egressName, strconv.FormatInt(count, 10), egressCAPath}
	if auth != "" {
		args = append(args, "'"+auth+"'")
	}
	cmd := strings.Join(args, " ")
	ex, err := c.Run(ctx, execdwire.RunCommandRequest{Command: cmd, Timeout: (10 * time.Minute).Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	if ex.ExitCode != 0 {
		return nil, fmt.Errorf("the client exited with %d: %s", ex.ExitCode, clip(strings.TrimSpace(string(ex.Stderr)), 400))
	}
	vs, err := parseSamples(string(ex.Stdout), sc.mode)
	if err != nil {
		return nil, err
	}
	if sc.mode == "download" && (len(vs) != 2 || vs[0] != count || vs[1] == 0) {
		return nil, fmt.Errorf("egress client: download: want %d bytes and a time, got %v", count, vs)
	}
	return vs, nil
}

// egressRow summarises the samples of sc in the unrestricted box (u), the
// limited one (l) and the limited one with a credential (cred, nil where
// not measured): latencies in ns, or for downloads pairs of bytes and ns
// (the median rate is kept).
func egressRow(sc egressScenario, backend string, u, l, cred []int64) EgressRow {
	row := EgressRow{Scenario: sc.name, Backend: backend}
	if sc.mode == "download" {
		rates := func(vs []int64) []float64 {
			var out []float64
			for i := 0; i+1 < len(vs); i += 2 {
				out = append(out, mbps(vs[i], time.Duration(vs[i+1])))
			}
			return out
		}
		row.Unit, row.N = "MB/s", len(u)/2
		if len(u) > 0 {
			row.Bytes = u[0]
		}
		row.UnrestrictedRate, row.LimitedRate = median(rates(u)), median(rates(l))
		if row.UnrestrictedRate > 0 {
			row.Ratio = row.LimitedRate / row.UnrestrictedRate
		}
		if cred != nil {
			row.CredentialRate = median(rates(cred))
			if row.UnrestrictedRate > 0 {
				row.CredentialRatio = row.CredentialRate / row.UnrestrictedRate
			}
		}
		return row
	}
	lu, ll := summarize(nanos(u)), summarize(nanos(l))
	row.Unit, row.N = "ms", lu.N
	row.Unrestricted, row.Limited = &lu, &ll
	row.Added = &Added{P50: ll.P50 - lu.P50, P90: ll.P90 - lu.P90, P99: ll.P99 - lu.P99}
	if lu.P50 > 0 {
		row.Ratio = ll.P50 / lu.P50
	}
	if cred != nil {
		lc := summarize(nanos(cred))
		row.Credential = &lc
		row.CredentialAdded = &Added{P50: lc.P50 - lu.P50, P90: lc.P90 - lu.P90, P99: lc.P99 - lu.P99}
		if lu.P50 > 0 {
			row.CredentialRatio = lc.P50 / lu.P50
		}
	}
	return row
}

// egressUpstream is the upstream of the egress bench: /small answers
// "ok", /bytes/N N zero bytes. It keeps the last Authorization it got
// (the credential box's must arrive as the secret's value).
type egressUpstream struct{ auth atomic.Pointer[string] }

func (u *egressUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		u.auth.Store(&auth)
	}
	if r.URL.Path == "/small" {
		w.Header().Set("Content-Length", "3")
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/bytes/"), 10, 64)
	if !strings.HasPrefix(r.URL.Path, "/bytes/") || err != nil || n < 0 {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}

// sizeString writes n bytes as "256 MiB", "16 KiB" or "1000 B".
func sizeString(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d %s", n/u.mult, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}
