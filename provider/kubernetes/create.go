package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

var (
	getOpts    = metav1.GetOptions{}
	createOpts = metav1.CreateOptions{}
	delNow     = metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
)

// Create implements sandbox.Provider: the box's Secret (its record, with
// execd's token), then its Pod (see podSpec), which is then made the
// Secret's owner; Create returns once the Pod is Running, its
// execd answers and the Spec's entrypoint has started. A Pod that cannot
// start fails the call with the reason the cluster gives (an image that
// cannot be pulled is CodeImageNotFound, an unschedulable Pod
// CodeUnavailable), within StartTimeout. ctx bounds the whole call; on
// any failure everything made so far is removed.
func (p *Provider) Create(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	if err := spec.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	if err := p.check(spec); err != nil {
		return sandbox.Info{}, err
	}
	unlock := p.lock(id)
	defer unlock()
	info, err := p.inspect(ctx, id)
	switch {
	case err == nil && info.State == sandbox.StateRunning:
		return info, nil
	case err == nil:
		// A failed or half-made box under this id: start afresh.
		if err := p.remove(ctx, id); err != nil {
			return sandbox.Info{}, err
		}
	case !errors.Is(err, sandbox.ErrNotFound):
		return sandbox.Info{}, err
	}
	info, err = p.start(ctx, id, spec)
	if errors.Is(err, errRace) {
		return sandbox.Info{}, sandbox.Errorf(sandbox.CodeConflict, "box %s is being created elsewhere", id)
	}
	if err != nil {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if rerr := p.remove(cleanup, id); rerr != nil {
			p.log.Error("clean up failed create", "backend", "kubernetes", "sandbox_id", id, "err", rerr)
		}
		return sandbox.Info{}, err
	}
	p.log.Debug("box created", "backend", "kubernetes", "sandbox_id", id, "image", spec.Image)
	return info, nil
}

// check refuses, before anything starts, what this backend cannot give.
func (p *Provider) check(spec sandbox.Spec) error {
	if spec.Image == "" {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "the kubernetes backend needs an image (an OCI image reference)")
	}
	caps := p.Capabilities()
	if err := caps.Check(spec); err != nil {
		return err
	}
	if !slices.Contains(caps.NetworkModes, spec.Network.Mode) {
		avail := make([]string, len(caps.NetworkModes))
		for i, m := range caps.NetworkModes {
			avail[i] = string(m)
		}
		return &sandbox.Error{Code: sandbox.CodeCapability, Message: fmt.Sprintf(
			"network mode %s is not supported by this Kubernetes backend; available: %s", spec.Network.Mode, strings.Join(avail, ", "))}
	}
	if spec.Workspace != nil {
		return &sandbox.Error{Code: sandbox.CodeCapability, Message: "the workspace field is not supported by the kubernetes backend"}
	}
	return nil
}

// errRace reports that the Pod was made by someone else between Create's
// inspection and start: a concurrent Create of the same box elsewhere.
var errRace = errors.New("pod exists")

// start makes the box; unless it returns errRace, the caller removes what
// it made when it fails.
func (p *Provider) start(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	var tb [24]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	// The Secret comes first, so that the kubelet finds it when it mounts
	// the Pod's volumes (a missing one costs a retry back-off); it is made
	// the Pod's once the Pod exists. A crash in between leaves a record
	// without a Pod, which List reports for the reconciler.
	if spec.Network.Mode == sandbox.NetworkUnrestricted {
		if err := p.ensureNetworkPolicy(ctx); err != nil {
			return sandbox.Info{}, err
		}
	}
	secrets := p.cs.CoreV1().Secrets(p.cfg.Namespace)
	_, err := secrets.Create(ctx, p.secretSpec(id, token, nil), createOpts)
	if apierrors.IsAlreadyExists(err) {
		return sandbox.Info{}, errRace
	}
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("create secret: %w", err)
	}
	pod, err := p.cs.CoreV1().Pods(p.cfg.Namespace).Create(ctx, p.podSpec(id, spec), createOpts)
	if apierrors.IsAlreadyExists(err) {
		return sandbox.Info{}, errRace
	}
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("create pod: %w", err)
	}
	owner, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": p.secretSpec(id, "", pod).OwnerReferences}})
	if _, err := secrets.Patch(ctx, pod.Name, types.MergePatchType, owner, metav1.PatchOptions{}); err != nil {
		return sandbox.Info{}, fmt.Errorf("own secret: %w", err)
	}
	st := boxState{Version: stateVersion, Pod: pod.Name, UID: string(pod.UID), Namespace: p.cfg.Namespace,
		Token: token, Network: spec.Network.Mode, CreatedAt: pod.CreationTimestamp.UTC()}
	if pod, err = p.waitRunning(ctx, id, pod); err != nil {
		return sandbox.Info{}, err
	}
	st.PodIP = pod.Status.PodIP
	if err := p.waitExecd(ctx, id, st); err != nil {
		return sandbox.Info{}, err
	}
	if len(spec.Entrypoint) > 0 {
		if err := p.startEntrypoint(ctx, id, st, spec.Entrypoint); err != nil {
			return sandbox.Info{}, err
		}
	}
	p.remember(id, st)
	info := infoOf(id, st)
	info.State = sandbox.StateRunning
	return info, nil
}

// waitRunning watches the Pod until its box container runs, it fails, or
// StartTimeout passes; a Pod that fails or never starts is an error with
// the cluster's reason. It watches rather than polls, so that many boxes
// starting at once cost the API server one stream each.
func (p *Provider) waitRunning(ctx context.Context, id string, pod *corev1.Pod) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	pods := p.cs.CoreV1().Pods(p.cfg.Namespace)
	last := pod
	for {
		state, reason := observed(last)
		switch {
		case state == sandbox.StateRunning:
			return last, nil
		case state == sandbox.StateFailed || state == sandbox.StateStopping:
			return nil, startError(id, reason)
		case strings.HasPrefix(reason, "image cannot be pulled"):
			// An image that will not come: no point in waiting. An
			// unschedulable Pod may yet be placed (an autoscaler).
			return nil, startError(id, reason)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + last.Name, ResourceVersion: last.ResourceVersion})
		if err == nil {
			last, err = nextPod(ctx, w, last)
		}
		switch {
		case errors.Is(err, errPodDeleted):
			return nil, fmt.Errorf("box %s: its pod was deleted while starting", id)
		case ctx.Err() != nil:
			_, why := observed(last)
			if why == "" {
				why = "pod " + string(last.Status.Phase)
			}
			if stuck(why) {
				return nil, startError(id, why)
			}
			return nil, sandbox.Errorf(sandbox.CodeTimeout, "box %s did not start within %s: %s", id, p.cfg.StartTimeout, why)
		case err != nil:
			// The watch broke (expired resource version, say): read the
			// Pod afresh and watch again.
			if fresh, gerr := pods.Get(ctx, last.Name, getOpts); gerr == nil {
				last = fresh
			} else if apierrors.IsNotFound(gerr) {
				return nil, fmt.Errorf("box %s: its pod was deleted while starting", id)
			}
		}
	}
}

var errPodDeleted = errors.New("pod deleted")

// nextPod returns the Pod of the first change w reports after last (or
// last itself when w ends without one, with an error).
func nextPod(ctx context.Context, w watch.Interface, last *corev1.Pod) (*corev1.Pod, error) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return last, errors.New("watch ended")
			}
			switch ev.Type {
			case watch.Deleted:
				return last, errPodDeleted
			case watch.Added, watch.Modified:
				if pod, ok := ev.Object.(*corev1.Pod); ok {
					return pod, nil
				}
			case watch.Error:
				return last, fmt.Errorf("watch: %v", apierrors.FromObject(ev.Object))
			}
		}
	}
}

// startError is the error of a box whose Pod failed to start for reason.
func startError(id, reason string) error {
	switch {
	case strings.Contains(reason, "image"):
		return sandbox.Errorf(sandbox.CodeImageNotFound, "box %s: %s", id, reason)
	case strings.HasPrefix(reason, "unschedulable"):
		return sandbox.Errorf(sandbox.CodeUnavailable, "box %s: %s", id, reason)
	}
	return sandbox.Errorf(sandbox.CodeRuntime, "box %s failed to start: %s", id, reason)
}

// waitExecd polls execd until it answers or StartTimeout passes. While
// execd does not answer it reads the Pod again every podRecheck, so that
// a Pod that failed or was evicted meanwhile (the kubelet then refuses
// its port-forward as "pod not found") ends the wait with the cluster's
// reason instead of the full timeout.
func (p *Provider) waitExecd(ctx context.Context, id string, st boxState) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	c := p.execdClient(id, st)
	delay := 5 * time.Millisecond
	nextCheck := time.Now().Add(podRecheck)
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Ping(pctx)
		pcancel()
		if err == nil {
			// The ping's connection is a stream pair on the Pod's
			// port-forward connection: not left open for nobody.
			c.HTTPClient().CloseIdleConnections()
			return nil
		}
		if time.Now().After(nextCheck) {
			if perr := p.podStillStarting(ctx, id, st); perr != nil {
				return fmt.Errorf("%w (execd: %v)", perr, err)
			}
			nextCheck = time.Now().Add(podRecheck)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("box %s: execd not ready: %w (last error: %v)", id, ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// podRecheck is how often waitExecd reads the Pod while execd is silent.
const podRecheck = 2 * time.Second

// podStillStarting returns an error when box id's Pod is gone, is not the
// one st names, or no longer runs; nil when it runs or cannot be read
// just now (the wait goes on).
func (p *Provider) podStillStarting(ctx context.Context, id string, st boxState) error {
	pod, err := p.cs.CoreV1().Pods(p.cfg.Namespace).Get(ctx, st.Pod, getOpts)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && string(pod.UID) != st.UID):
		return fmt.Errorf("box %s: its pod was deleted while starting", id)
	case err != nil:
		return nil
	}
	if state, reason := observed(pod); state != sandbox.StateRunning {
		if reason == "" {
			reason = "pod " + string(pod.Status.Phase)
		}
		return startError(id, reason)
	}
	return nil
}

func (p *Provider) execdClient(id string, st boxState) *execdclient.Client {
	return execdclient.New("http://execd", execdclient.WithToken(st.Token), execdclient.WithDialer(func(ctx context.Context) (net.Conn, error) {
		return p.dialState(ctx, id, st)
	}))
}

// startEntrypoint runs the Spec's entrypoint beside execd, in the
// background as root in /workspace with the box's environment, through
// execd (the image's /bin/sh runs the quoted argv).
func (p *Provider) startEntrypoint(ctx context.Context, id string, st boxState, argv []string) error {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	_, err := p.execdClient(id, st).Run(ctx, wire.RunCommandRequest{Command: "exec " + strings.Join(quoted, " "), Background: true, Cwd: boxWorkspace})
	if err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "start entrypoint %q: %v", argv, err)
	}
	return nil
}
