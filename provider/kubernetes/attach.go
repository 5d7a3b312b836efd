package kubernetes

import (
	"context"
	"fmt"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/astrabox/astrabox/sandbox"
)

// decodeState reads a state blob; an ErrBadStateBlob-wrapped error when
// it is not one of this version.
func decodeState(id string, b []byte) (boxState, error) {
	return sandbox.DecodeStateBlob[boxState](id, b, stateVersion)
}

// Attach implements sandbox.Attacher. A box whose Pod and Secret are
// there needs nothing from blob: it is inspected. A box whose Secret was
// lost (a crash between making the Pod and its Secret, or a Secret
// deleted by hand) gets it back from blob when the Pod of the box's name
// is the blob's Pod (same UID, same namespace); execd read its token at
// start, so the restored Secret matches it.
func (p *Provider) Attach(ctx context.Context, id string, blob []byte) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	st, err := decodeState(id, blob)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	unlock := p.lock(id)
	defer unlock()
	name := p.podName(id)
	pod, err := p.cs.CoreV1().Pods(p.cfg.Namespace).Get(ctx, name, getOpts)
	switch {
	case apierrors.IsNotFound(err):
		return sandbox.Info{}, fmt.Errorf("attach %s: its pod is gone: %w", id, sandbox.ErrNotFound)
	case err != nil:
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	case st.Pod != name || st.Namespace != p.cfg.Namespace || types.UID(st.UID) != pod.UID:
		return sandbox.Info{}, fmt.Errorf("attach %s: the pod of that name is not the blob's: %w", id, sandbox.ErrNotFound)
	}
	sec, err := p.cs.CoreV1().Secrets(p.cfg.Namespace).Get(ctx, name, getOpts)
	switch {
	case err == nil && ownedBy(sec, pod):
		return p.inspect(ctx, id)
	case err == nil:
		// A stale record of an earlier Pod of that name.
		if err := p.cs.CoreV1().Secrets(p.cfg.Namespace).Delete(ctx, name, delNow); err != nil && !apierrors.IsNotFound(err) {
			return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
		}
	case !apierrors.IsNotFound(err):
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	if _, err := p.cs.CoreV1().Secrets(p.cfg.Namespace).Create(ctx, p.secretSpec(id, st.Token, pod), createOpts); err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: restore its record: %w", id, err)
	}
	return p.inspect(ctx, id)
}

// Instance implements sandbox.Instancer: "kubernetes:CLUSTER:NAMESPACE:OWNER",
// where CLUSTER is the UID of the cluster's kube-system namespace (the
// customary cluster identity) or, where this server may not read it, the
// API server's host. Replicas that reach one cluster, namespace and owner
// serve one instance, and one of them reconciles it at a time.
func (p *Provider) Instance(ctx context.Context) (string, error) {
	p.instanceMu.Lock()
	defer p.instanceMu.Unlock()
	if p.instance != "" {
		return p.instance, nil
	}
	cluster := ""
	ns, err := p.cs.CoreV1().Namespaces().Get(ctx, "kube-system", getOpts)
	switch {
	case err == nil:
		cluster = string(ns.UID)
	case apierrors.IsForbidden(err):
		u, perr := url.Parse(p.rest.Host)
		if perr != nil || u.Host == "" {
			return "", fmt.Errorf("kubernetes cluster identity: %w", err)
		}
		cluster = u.Host
	default:
		return "", fmt.Errorf("kubernetes cluster identity: %w", err)
	}
	p.instance = "kubernetes:" + cluster + ":" + p.cfg.Namespace + ":" + p.cfg.Owner
	return p.instance, nil
}

var (
	_ sandbox.Attacher  = (*Provider)(nil)
	_ sandbox.Instancer = (*Provider)(nil)
)
