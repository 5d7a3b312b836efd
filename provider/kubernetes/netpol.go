package kubernetes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// The NetworkPolicy of network unrestricted. Boxes of mode unrestricted
// keep the Pod network, so what they may reach is the cluster's network
// plugin's to enforce (Config.EgressFiltered says it does). One policy
// per owner and namespace selects the owner's unrestricted Pods (by the
// labelNetwork label) and allows:
//
//   - egress to every address but the blocked ranges: cloud metadata and
//     link-local, private and shared ranges (which hold the cluster's Pod
//     and Service ranges on every common set-up), loopback, and IPv6
//     unique-local and link-local;
//   - egress to port 53 (UDP and TCP) of the Pods of kube-system, so that
//     names resolve through the cluster's DNS;
//   - ingress only to execd's port, only from Pods labelled
//     io.astrabox.server=<owner> (an AstraBox server running in the
//     cluster with Config.Direct; the port-forward path does not cross the
//     Pod network at all).
//
// The policy is made before the first unrestricted box of a Provider
// starts, and put back as it should be when it was changed; it is left in
// place when boxes go (it selects nothing then), and removed with the
// namespace.

// labelNetwork is the label, on every box Pod, holding its network mode.
const labelNetwork = "io.astrabox.network"

// labelServer marks the Pods of an AstraBox server that may reach the
// execd of its owner's boxes directly (deploy/kubernetes/astrabox.yaml).
const labelServer = "io.astrabox.server"

// blockedV4 and blockedV6 are the ranges no box of mode unrestricted may
// reach. (The API server refuses IPv4-mapped IPv6 ranges in a policy; a
// Pod's kernel sends to such an address as IPv4, which blockedV4 covers.)
var (
	blockedV4 = []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/3",
	}
	blockedV6 = []string{"::1/128", "64:ff9b::/96", "fc00::/7", "fe80::/10", "ff00::/8"}
)

// networkPolicyName is the name of the owner's unrestricted policy.
func (p *Provider) networkPolicyName() string {
	if p.cfg.Owner == "astrabox" {
		return "abx-unrestricted"
	}
	return "abx-" + shortHash(p.cfg.Owner) + "-unrestricted"
}

// networkPolicy is the owner's policy of network unrestricted, as the
// comment above says.
func (p *Provider) networkPolicy() *networkingv1.NetworkPolicy {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dns := intstr.FromInt32(53)
	execd := intstr.FromInt32(int32(wire.DefaultPort))
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      p.networkPolicyName(),
			Namespace: p.cfg.Namespace,
			Labels:    map[string]string{labelOwner: p.cfg.Owner, labelBackend: "kubernetes"},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				labelOwner: p.cfg.Owner, labelBackend: "kubernetes", labelNetwork: string(sandbox.NetworkUnrestricted)}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &execd}},
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{labelServer: p.cfg.Owner}},
				}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{
					{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: blockedV4}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: blockedV6}},
				}},
				{
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
					To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
						MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}}},
				},
			},
		},
	}
}

// ensureNetworkPolicy makes the owner's unrestricted policy, or puts back
// its spec when someone changed it. Once it is in place a Provider does
// not look again (Pods are only ever made after it).
func (p *Provider) ensureNetworkPolicy(ctx context.Context) error {
	p.mu.Lock()
	done := p.netpolReady
	p.mu.Unlock()
	if done {
		return nil
	}
	want := p.networkPolicy()
	pols := p.cs.NetworkingV1().NetworkPolicies(p.cfg.Namespace)
	got, err := pols.Get(ctx, want.Name, getOpts)
	switch {
	case apierrors.IsNotFound(err):
		if _, err := pols.Create(ctx, want, createOpts); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create network policy %s: %w", want.Name, err)
		}
	case err != nil:
		return fmt.Errorf("read network policy %s: %w", want.Name, err)
	case !equality.Semantic.DeepEqual(got.Spec, want.Spec):
		got.Spec = want.Spec
		if _, err := pols.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("restore network policy %s: %w", want.Name, err)
		}
		p.log.Warn("network policy had been changed; restored", "backend", "kubernetes", "policy", want.Name)
	}
	p.mu.Lock()
	p.netpolReady = true
	p.mu.Unlock()
	return nil
}
