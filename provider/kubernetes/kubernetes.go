// Package kubernetes is the sandbox backend built on a Kubernetes cluster:
// each box is one Pod in a configured namespace, running AstraBox's execd
// as the box container's command. It is the only package that imports
// client-go.
//
// A box's Pod (see podSpec) runs the Spec's image with execd copied into
// a memory emptyDir by an init container of Config.ExecdImage (an image
// holding only the static astrabox binary, which runs itself as
// `astrabox kube-init`), so no host path of any node is mounted. The box
// is hardened: not privileged, no privilege escalation (no_new_privs), no
// service-account token, every capability dropped but the few the box's
// root needs, seccomp RuntimeDefault (or the configured Localhost profile),
// memory emptyDirs bounded by the disk limit for /workspace and /tmp, CPU
// and memory limits, and the runtime class of the profile. PID 1 of the
// box container is `astrabox kube-init --exec`, which starts execd, reaps
// orphans and keeps them in execd's session (as docker-init does).
//
// Network none is a pod without a network: the init container (the only
// one with CAP_NET_ADMIN, running AstraBox's own binary before anything of
// the box) deletes every interface but loopback from the pod's network
// namespace, whatever the cluster's CNI. execd is then reached through the
// API server's port-forward, which the kubelet serves from inside the
// pod's network namespace. Network unrestricted keeps the pod network and
// is offered only where the operator states that the cluster filters the
// egress of the backend's pods (Config.EgressFiltered); the backend then
// adds a NetworkPolicy that blocks cloud metadata and private ranges and
// admits ingress only from AstraBox (netpol.go).
//
// The access token of each box is in a Secret of the box's name, owned by
// its Pod (so the cluster's garbage collector removes a Secret whose Pod
// went), mounted read-only for execd. The Secret is the box's record: a
// Pod without one is an orphan (Failed), which Attach with the box's state
// blob restores.
//
// State mapping: a Pod that is Pending (scheduling, pulling, initialising)
// is Pending, a Running pod whose box container runs is Running, a Pod
// marked for deletion is Stopping; a Succeeded or Failed Pod, a box
// container that terminated or waits in an error (an image that cannot be
// pulled, a crash), and a Pod without its Secret are Failed, with the
// reason. Pause is not offered: Kubernetes has no way to freeze a Pod.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/astrabox/astrabox/sandbox"
)

// Config configures the Kubernetes backend.
type Config struct {
	// Kubeconfig is the path of the kubeconfig file that reaches the
	// cluster; empty means in-cluster configuration (the Pod's service
	// account).
	Kubeconfig string
	// Context is the kubeconfig context to use (default: its current one).
	Context string
	// Namespace holds the boxes' Pods (default "astrabox-sandboxes"); it
	// must exist.
	Namespace string
	// ExecdImage is the image holding only the static astrabox binary, at
	// /astrabox, that the init container of every box runs (`make
	// image-execd` builds it). Required.
	ExecdImage string
	// PullPolicy is the image pull policy of the box and init containers:
	// "IfNotPresent" (the default: a preloaded image is never pulled) or
	// "Never". The backend never forces a pull.
	PullPolicy PullPolicy
	// Owner is the value of the io.astrabox.owner label on every object
	// the backend creates; replicas serving one namespace set the same
	// owner (default "astrabox").
	Owner string
	// Direct dials execd at the Pod's IP instead of through the API
	// server's port-forward, for a server that runs inside the cluster.
	// Boxes of network none have no Pod IP and are always reached through
	// port-forward.
	Direct bool
	// EgressFiltered states that the cluster's network plugin enforces
	// NetworkPolicy for the namespace, so that network unrestricted (with
	// metadata and private ranges blocked by the backend's policy) can be
	// offered.
	EgressFiltered bool
	// SeccompProfile is the Localhost seccomp profile of boxes, relative
	// to the kubelet's seccomp directory on every node; empty is the
	// container runtime's default profile (RuntimeDefault). Boxes never
	// run unconfined.
	SeccompProfile string
	// RuntimeClass is the RuntimeClass of boxes whose Spec names none
	// ("" for the cluster's default runtime).
	RuntimeClass string
	// Isolation is the isolation of RuntimeClass when its name does not
	// tell (see runtimeIsolation); required for such a class.
	Isolation sandbox.Isolation
	// RuntimeClasses are further RuntimeClasses a profile may choose
	// (sandbox.Spec.Runtime), each with its isolation and placement: how
	// profiles put their boxes on their own nodes.
	RuntimeClasses []RuntimeClass
	// NodeSelector and Tolerations place the Pods of boxes whose runtime
	// class has no placement of its own.
	NodeSelector map[string]string
	Tolerations  []Toleration
	// RequestPercent is the share of each limit that the Pod requests
	// (default 100: requests equal limits, Guaranteed QoS); lower values
	// overcommit the nodes, but make the Pod Burstable, whose execd the
	// kernel's OOM killer then takes before the box's own processes.
	RequestPercent int
	// Defaults are the limits of a box whose Spec leaves them zero.
	Defaults sandbox.Resources
	// StartTimeout bounds waiting for a new box's Pod to be Ready and its
	// execd to answer (default 2 minutes).
	StartTimeout time.Duration
	// Logger receives operational logs.
	Logger *slog.Logger

	// rest overrides the client configuration (tests).
	rest *rest.Config
}

// PullPolicy is an image pull policy: "IfNotPresent" or "Never".
type PullPolicy string

// RuntimeClass is a Kubernetes RuntimeClass that boxes may run under.
type RuntimeClass struct {
	Name string
	// Isolation is what the class gives; empty when its name tells (see
	// runtimeIsolation).
	Isolation sandbox.Isolation
	// NodeSelector and Tolerations, when set, place the class's Pods
	// instead of Config's.
	NodeSelector map[string]string
	Tolerations  []Toleration
}

// Toleration is a Pod toleration, as the Kubernetes API spells it.
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"` // Exists or Equal (default)
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"` // NoSchedule, PreferNoSchedule, NoExecute or empty (all)
}

// Default limits of a box.
var defaultResources = sandbox.Resources{MilliCPU: 1000, MemoryBytes: 512 << 20, DiskBytes: 1 << 30}

// Provider is the Kubernetes backend. It is safe for concurrent use. It
// keeps nothing about boxes in memory but connections: a new Provider on
// the same namespace and owner re-attaches to the boxes of an earlier one.
type Provider struct {
	cfg  Config
	log  *slog.Logger
	rest *rest.Config
	cs   kubernetes.Interface

	mu     sync.Mutex
	locks  map[string]*sync.Mutex // per box id
	fwd    map[string]*forwarder  // port-forward connections, by pod name
	states map[string]boxState    // what Dial needs of boxes seen running, by id
	// netpolReady is set once the unrestricted NetworkPolicy is in place (netpol.go).
	netpolReady bool

	instanceMu sync.Mutex
	instance   string
}

// New checks cfg and returns a Provider. It does not contact the cluster:
// Health does.
func New(cfg Config) (*Provider, error) {
	if cfg.ExecdImage == "" {
		return nil, errors.New("kubernetes: ExecdImage is required (an image holding the static astrabox binary)")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "astrabox-sandboxes"
	}
	if cfg.Owner == "" {
		cfg.Owner = "astrabox"
	}
	if err := validLabelValue(cfg.Owner); err != nil {
		return nil, fmt.Errorf("kubernetes: owner: %w", err)
	}
	switch cfg.PullPolicy {
	case "":
		cfg.PullPolicy = PullPolicy(corev1.PullIfNotPresent)
	case PullPolicy(corev1.PullIfNotPresent), PullPolicy(corev1.PullNever):
	default:
		return nil, fmt.Errorf("kubernetes: pull policy %q: want IfNotPresent or Never", cfg.PullPolicy)
	}
	if cfg.RequestPercent == 0 {
		cfg.RequestPercent = 100
	}
	if cfg.RequestPercent < 1 || cfg.RequestPercent > 100 {
		return nil, fmt.Errorf("kubernetes: requestPercent %d: want 1 to 100", cfg.RequestPercent)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Isolation == "" {
		iso, ok := runtimeIsolation(cfg.RuntimeClass)
		if !ok {
			return nil, fmt.Errorf("kubernetes: runtime class %q: set its isolation", cfg.RuntimeClass)
		}
		cfg.Isolation = iso
	}
	for _, t := range cfg.Tolerations {
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("kubernetes: %w", err)
		}
	}
	for i, r := range cfg.RuntimeClasses {
		if r.Name == "" {
			return nil, errors.New("kubernetes: a runtime class needs a name")
		}
		for _, t := range r.Tolerations {
			if err := t.check(); err != nil {
				return nil, fmt.Errorf("kubernetes: runtime class %s: %w", r.Name, err)
			}
		}
		if r.Isolation == "" {
			iso, ok := runtimeIsolation(r.Name)
			if !ok {
				return nil, fmt.Errorf("kubernetes: runtime class %q: set its isolation", r.Name)
			}
			cfg.RuntimeClasses[i].Isolation = iso
		}
	}
	cfg.Defaults = cfg.Defaults.WithDefaults(defaultResources)
	rc := cfg.rest
	if rc == nil {
		var err error
		if rc, err = restConfig(cfg.Kubeconfig, cfg.Context); err != nil {
			return nil, fmt.Errorf("kubernetes: %w", err)
		}
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	return &Provider{cfg: cfg, log: cfg.Logger, rest: rc, cs: cs,
		locks: map[string]*sync.Mutex{}, fwd: map[string]*forwarder{}, states: map[string]boxState{}}, nil
}

// restConfig loads a kubeconfig file, or the in-cluster configuration
// when path is empty.
func restConfig(path, context string) (*rest.Config, error) {
	if path == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (no kubeconfig given): %w", err)
		}
		return c, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return c, nil
}

// runtimeIsolation is the isolation a RuntimeClass gives, told by its
// name: the default runtime and runc-like ones give container, gVisor
// sandboxed, Kata and Firecracker vm.
func runtimeIsolation(name string) (sandbox.Isolation, bool) {
	r := strings.ToLower(name)
	switch {
	case r == "" || r == "runc" || r == "crun" || r == "youki":
		return sandbox.IsolationContainer, true
	case strings.Contains(r, "runsc") || strings.Contains(r, "gvisor"):
		return sandbox.IsolationSandboxed, true
	case strings.Contains(r, "kata") || strings.Contains(r, "firecracker") || strings.Contains(r, "fc"):
		return sandbox.IsolationVM, true
	}
	return "", false
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return "kubernetes" }

// Capabilities implements sandbox.Provider. CPU and memory limits are the
// box container's; the disk limit bounds /workspace and /tmp (memory
// emptyDirs) but not the image's writable layer, so it is not claimed;
// a pids limit per Pod is the kubelet's (podPidsLimit), not the Spec's,
// so neither is it.
func (p *Provider) Capabilities() sandbox.Capabilities {
	c := sandbox.Capabilities{
		Isolation:    p.cfg.Isolation,
		NetworkModes: []sandbox.NetworkMode{sandbox.NetworkNone},
		Limits:       []sandbox.Resource{sandbox.ResourceCPU, sandbox.ResourceMemory},
		Ports:        true,
		PTY:          true,
	}
	if p.cfg.EgressFiltered {
		c.NetworkModes = append(c.NetworkModes, sandbox.NetworkUnrestricted)
	}
	if len(p.cfg.RuntimeClasses) > 0 {
		if p.cfg.RuntimeClass != "" {
			c.Runtimes = append(c.Runtimes, sandbox.Runtime{Name: p.cfg.RuntimeClass, Isolation: p.cfg.Isolation})
		}
		for _, r := range p.cfg.RuntimeClasses {
			if r.Name != p.cfg.RuntimeClass {
				c.Runtimes = append(c.Runtimes, sandbox.Runtime{Name: r.Name, Isolation: r.Isolation})
			}
		}
	}
	return c
}

// Health implements sandbox.Provider: unhealthy when the API server does
// not answer or the namespace cannot be read.
func (p *Provider) Health(ctx context.Context) sandbox.Health {
	if _, err := p.cs.CoreV1().Namespaces().Get(ctx, p.cfg.Namespace, getOpts); err != nil {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: fmt.Sprintf("namespace %s: %v", p.cfg.Namespace, err)}
	}
	return sandbox.Health{Status: sandbox.Healthy}
}

// Close releases the port-forward connections. Boxes keep running; a
// server need not call it.
func (p *Provider) Close() error {
	p.mu.Lock()
	fwd := p.fwd
	p.fwd = map[string]*forwarder{}
	p.mu.Unlock()
	for _, f := range fwd {
		f.close()
	}
	return nil
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

// check refuses a toleration the API server would.
func (t Toleration) check() error {
	switch t.Operator {
	case "", "Equal":
	case "Exists":
		if t.Value != "" {
			return fmt.Errorf("toleration %q: operator Exists takes no value", t.Key)
		}
	default:
		return fmt.Errorf("toleration %q: operator %q: want Exists or Equal", t.Key, t.Operator)
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		return fmt.Errorf("toleration %q: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect)
	}
	return nil
}

// validID accepts the ids AstraBox generates: 1 to 63 lower-case letters,
// digits and '-', starting with a letter or digit (what a Pod name and a
// label value hold unchanged).
func validID(id string) error {
	if err := validLabelValue(id); err != nil || strings.ContainsAny(id, "_.ABCDEFGHIJKLMNOPQRSTUVWXYZ") || strings.HasSuffix(id, "-") {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid sandbox id %q for the kubernetes backend (1 to 63 lower-case letters, digits and '-')", id)
	}
	return nil
}

// validLabelValue accepts what a Kubernetes label value may hold.
func validLabelValue(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%q must be 1 to 63 characters", s)
	}
	for i, c := range s {
		ok := c == '-' || c == '_' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		alnum := c != '-' && c != '_' && c != '.'
		if !ok || ((i == 0 || i == len(s)-1) && !alnum) {
			return fmt.Errorf("%q may hold only letters, digits, '-', '_' and '.', starting and ending with a letter or digit", s)
		}
	}
	return nil
}
