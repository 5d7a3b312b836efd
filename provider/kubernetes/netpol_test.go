package kubernetes

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// TestUnrestrictedNetworkPolicy checks that an unrestricted box's Pod is
// selected by its owner's NetworkPolicy, which blocks metadata and private
// ranges and admits only AstraBox to execd, and that a new Provider puts
// back a policy someone widened. (The test cluster's network plugin does
// not enforce NetworkPolicy: what is checked is the policy the API server
// holds.)
func TestUnrestrictedNetworkPolicy(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.EgressFiltered = true })
	spec := h.Spec()
	spec.Network.Mode = sandbox.NetworkUnrestricted
	b := sandboxtest.NewBox(t, h, &spec)
	if res, err := b.Client.Run(ctx(t), runReq("echo ok")); err != nil || res.ExitCode != 0 {
		t.Fatalf("run in the unrestricted box: %+v %v", res, err)
	}

	pols := h.p.cs.NetworkingV1().NetworkPolicies(h.cfg.Namespace)
	pol, err := pols.Get(ctx(t), h.p.networkPolicyName(), getOpts)
	if err != nil {
		t.Fatalf("the unrestricted policy: %v", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&pol.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := h.p.cs.CoreV1().Pods(h.cfg.Namespace).Get(ctx(t), h.p.podName(b.ID), getOpts)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(pod.Labels)) {
		t.Fatalf("policy selector %s does not select the box's Pod (labels %v)", sel, pod.Labels)
	}
	none := map[string]string{}
	for k, v := range pod.Labels {
		none[k] = v
	}
	none[labelNetwork] = string(sandbox.NetworkNone)
	if sel.Matches(labels.Set(none)) {
		t.Fatalf("policy selector %s selects a box of network none too", sel)
	}
	var except []string
	for _, r := range pol.Spec.Egress {
		for _, to := range r.To {
			if to.IPBlock != nil {
				except = append(except, to.IPBlock.Except...)
			}
		}
	}
	for _, must := range []string{"169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fe80::/10"} {
		if !slices.Contains(except, must) {
			t.Errorf("egress does not except %s: %v", must, except)
		}
	}
	if len(pol.Spec.Ingress) != 1 || len(pol.Spec.Ingress[0].From) != 1 ||
		pol.Spec.Ingress[0].From[0].PodSelector.MatchLabels[labelServer] != h.cfg.Owner {
		t.Errorf("ingress is not only from the owner's servers: %+v", pol.Spec.Ingress)
	}

	// Widened by hand: a new Provider's first unrestricted box restores it.
	pol.Spec.Egress = append(pol.Spec.Egress, pol.Spec.Egress[0])
	pol.Spec.Egress[len(pol.Spec.Egress)-1].To = nil
	if _, err := pols.Update(ctx(t), pol, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p2 := h.Reopen(t).(*Provider)
	id := sandboxtest.NewID()
	if _, err := p2.Create(ctx(t), id, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p2.Delete(ctx(t), id) })
	got, err := pols.Get(ctx(t), h.p.networkPolicyName(), getOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Egress) != 2 {
		t.Fatalf("the widened policy was not restored: %d egress rules", len(got.Spec.Egress))
	}
}
