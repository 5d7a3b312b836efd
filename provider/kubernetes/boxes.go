package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/astrabox/astrabox/sandbox"
)

// stateVersion is the version of boxState this package writes and reads.
const stateVersion = 1

// boxState is the versioned state blob of a box (Info.StateBlob): what
// Attach needs to restore the box's record, its Secret.
type boxState struct {
	Version   int                 `json:"version"`
	Namespace string              `json:"namespace"`
	Pod       string              `json:"pod"`
	UID       string              `json:"uid"` // the Pod's
	PodIP     string              `json:"podIP,omitempty"`
	Token     string              `json:"token"`
	Network   sandbox.NetworkMode `json:"network"`
	CreatedAt time.Time           `json:"createdAt"`
}

func infoOf(id string, st boxState) sandbox.Info {
	b, _ := json.Marshal(st)
	return sandbox.Info{ID: id, CreatedAt: st.CreatedAt, AccessToken: st.Token, StateBlob: b}
}

// observed maps a Pod onto a State and the reason behind it. Reasons of a
// Pod that waits name what it waits for: "image ..." for an image that
// cannot be pulled, "unschedulable: ..." for a Pod no node takes. A box
// container that ended is Failed with sandbox.ReasonOOMKilled when the
// kubelet says OOMKilled, else sandbox.ReasonExited, and its exit code.
func observed(pod *corev1.Pod) (sandbox.State, string) {
	if pod.DeletionTimestamp != nil {
		return sandbox.StateStopping, "being deleted"
	}
	for _, c := range pod.Status.InitContainerStatuses {
		if t := c.State.Terminated; t != nil && t.ExitCode != 0 {
			return sandbox.StateFailed, fmt.Sprintf("init container %s exited %d (%s): %s", c.Name, t.ExitCode, t.Reason, t.Message)
		}
		if w := c.State.Waiting; w != nil {
			if r := waitingReason(w); r != "" {
				return sandbox.StatePending, r
			}
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name != boxContainer {
			continue
		}
		switch {
		case c.State.Terminated != nil:
			t := c.State.Terminated
			reason := fmt.Sprintf("%s: box container exited with code %d (%s)", sandbox.ReasonExited, t.ExitCode, t.Reason)
			if t.Reason == "OOMKilled" {
				reason = fmt.Sprintf("%s: box container was killed out of memory (exit code %d)", sandbox.ReasonOOMKilled, t.ExitCode)
			}
			if t.Message != "" {
				reason += ": " + t.Message
			}
			return sandbox.StateFailed, reason
		case c.State.Running != nil && pod.Status.Phase == corev1.PodRunning:
			return sandbox.StateRunning, ""
		case c.State.Waiting != nil:
			if r := waitingReason(c.State.Waiting); r != "" {
				if strings.HasPrefix(c.State.Waiting.Reason, "Create") || c.State.Waiting.Reason == "RunContainerError" {
					return sandbox.StateFailed, r
				}
				return sandbox.StatePending, r
			}
		}
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		reason := "pod " + string(pod.Status.Phase)
		if pod.Status.Reason != "" {
			reason += " (" + pod.Status.Reason + "): " + pod.Status.Message
		}
		return sandbox.StateFailed, reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return sandbox.StatePending, "unschedulable: " + c.Message
		}
	}
	return sandbox.StatePending, ""
}

// waitingReason describes a container that waits in an error; "" for one
// that merely starts.
func waitingReason(w *corev1.ContainerStateWaiting) string {
	switch w.Reason {
	case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
		return "image cannot be pulled (" + w.Reason + "): " + w.Message
	case "CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return w.Reason + ": " + w.Message
	}
	return ""
}

// stuck reports whether a Pending reason will not resolve by waiting.
func stuck(reason string) bool {
	return strings.HasPrefix(reason, "image cannot be pulled") || strings.HasPrefix(reason, "unschedulable")
}

// inspect combines box id's Pod with its record, the Secret.
func (p *Provider) inspect(ctx context.Context, id string) (sandbox.Info, error) {
	name := p.podName(id)
	pod, err := p.cs.CoreV1().Pods(p.cfg.Namespace).Get(ctx, name, getOpts)
	podGone := apierrors.IsNotFound(err)
	if err != nil && !podGone {
		return sandbox.Info{}, fmt.Errorf("inspect box %s: %w", id, err)
	}
	sec, err := p.cs.CoreV1().Secrets(p.cfg.Namespace).Get(ctx, name, getOpts)
	secGone := apierrors.IsNotFound(err)
	if err != nil && !secGone {
		return sandbox.Info{}, fmt.Errorf("inspect box %s: %w", id, err)
	}
	switch {
	case podGone && secGone:
		return sandbox.Info{}, fmt.Errorf("box %s: %w", id, sandbox.ErrNotFound)
	case podGone:
		return sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: sandbox.ReasonLost + ": its pod is gone", CreatedAt: sec.CreationTimestamp.UTC()}, nil
	case secGone || !ownedBy(sec, pod):
		return sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: "pod without a box record (an interrupted create)",
			CreatedAt: pod.CreationTimestamp.UTC()}, nil
	}
	st := stateOf(pod, sec)
	info := infoOf(id, st)
	info.State, info.Reason = observed(pod)
	if info.State == sandbox.StateRunning {
		p.remember(id, st)
	}
	return info, nil
}

// stateOf is the box's state as its Pod and Secret tell it.
func stateOf(pod *corev1.Pod, sec *corev1.Secret) boxState {
	st := boxState{Version: stateVersion, Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID),
		PodIP: pod.Status.PodIP, Network: sandbox.NetworkMode(pod.Annotations[annNetwork]),
		CreatedAt: pod.CreationTimestamp.UTC()}
	if sec != nil {
		st.Token = string(sec.Data[tokenKey])
	}
	return st
}

// ownedBy reports whether sec is the record of pod (not of an earlier Pod
// of the same name).
func ownedBy(sec *corev1.Secret, pod *corev1.Pod) bool {
	for _, o := range sec.OwnerReferences {
		if o.Kind == "Pod" && o.UID == pod.UID {
			return true
		}
	}
	return false
}

// Inspect implements sandbox.Provider.
func (p *Provider) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	return p.inspect(ctx, id)
}

// List implements sandbox.Provider: every Pod and Secret labelled with
// this backend's owner. A Pod without its Secret, or a Secret without its
// Pod (left by a crash), is listed as Failed for the reconciler to delete.
func (p *Provider) List(ctx context.Context) ([]sandbox.Info, error) {
	opts := metav1.ListOptions{LabelSelector: p.selector()}
	pods, err := p.cs.CoreV1().Pods(p.cfg.Namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	secs, err := p.cs.CoreV1().Secrets(p.cfg.Namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	records := map[string]*corev1.Secret{}
	for i := range secs.Items {
		records[secs.Items[i].Labels[labelID]] = &secs.Items[i]
	}
	seen := map[string]bool{}
	var out []sandbox.Info
	for i := range pods.Items {
		pod := &pods.Items[i]
		id := pod.Labels[labelID]
		if validID(id) != nil || seen[id] || pod.Name != p.podName(id) {
			continue
		}
		seen[id] = true
		sec := records[id]
		if sec == nil || !ownedBy(sec, pod) {
			out = append(out, sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: "pod without a box record",
				CreatedAt: pod.CreationTimestamp.UTC()})
			continue
		}
		info := infoOf(id, stateOf(pod, sec))
		info.State, info.Reason = observed(pod)
		out = append(out, info)
	}
	for id, sec := range records {
		if seen[id] || validID(id) != nil {
			continue
		}
		out = append(out, sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: "box record without a pod",
			CreatedAt: sec.CreationTimestamp.UTC()})
	}
	return out, nil
}

// Delete implements sandbox.Provider: the Pod is deleted with a grace
// period of one second (execd and the box's processes are sent SIGTERM,
// then SIGKILL) with its Secret; Delete returns once the API server no
// longer knows either, which for the Pod is once the kubelet has reported
// its containers gone.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := p.lock(id)
	defer unlock()
	return p.remove(ctx, id)
}

func (p *Provider) remove(ctx context.Context, id string) error {
	name := p.podName(id)
	p.forget(id)
	p.dropForwarder(name)
	// A grace period of one second, not zero: zero deletes the Pod from
	// the API at once (a forced delete) while its processes may still run
	// on the node; with one the API server keeps the Pod until the kubelet
	// reports its containers gone.
	grace := int64(1)
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{GracePeriodSeconds: &grace, PropagationPolicy: &bg}
	pods, secs := p.cs.CoreV1().Pods(p.cfg.Namespace), p.cs.CoreV1().Secrets(p.cfg.Namespace)
	delay := 20 * time.Millisecond
	for {
		errPod := pods.Delete(ctx, name, del)
		errSec := secs.Delete(ctx, name, del)
		_, getPod := pods.Get(ctx, name, getOpts)
		_, getSec := secs.Get(ctx, name, getOpts)
		if apierrors.IsNotFound(getPod) && apierrors.IsNotFound(getSec) {
			return nil
		}
		last := getPod
		for _, e := range []error{errPod, errSec, getSec} {
			if e != nil && !apierrors.IsNotFound(e) {
				last = e
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete %s: pod not confirmed gone: %w (last: %v)", id, ctx.Err(), last)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// Pause implements sandbox.Provider: Kubernetes cannot freeze a Pod, so
// it is refused with CodeCapability, wrapping sandbox.ErrUnsupported.
func (p *Provider) Pause(ctx context.Context, id string) error {
	return sandbox.Errorf(sandbox.CodeCapability, "capability pause is not supported by the kubernetes backend (a pod cannot be frozen): %w", sandbox.ErrUnsupported)
}

// Resume implements sandbox.Provider; see Pause.
func (p *Provider) Resume(ctx context.Context, id string) error {
	return sandbox.Errorf(sandbox.CodeCapability, "capability pause is not supported by the kubernetes backend (a pod cannot be frozen): %w", sandbox.ErrUnsupported)
}
