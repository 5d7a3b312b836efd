package kubernetes

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// Labels and annotations on everything the backend creates.
const (
	labelID      = "io.astrabox.sandbox-id"
	labelOwner   = "io.astrabox.owner"
	labelBackend = "io.astrabox.backend" // always "kubernetes"
	annNetwork   = "io.astrabox.network" // the box's network mode
)

// Paths in a box.
const (
	boxHome      = "/.astrabox" // the memory emptyDir execd is copied into, read-only in the box
	boxBinary    = boxHome + "/astrabox"
	boxTokenDir  = "/.astrabox-token" // the box's Secret, read-only
	tokenKey     = "token"
	boxWorkspace = "/workspace"
	boxContainer = "box"
	initName     = "astrabox-init"
)

// boxCapabilities are all that root in a box keeps (the Docker backend's
// set, for the same reasons): file handling of every user, running
// commands as other users and emptying their bounding sets, signalling
// them, and binding ports below 1024.
var boxCapabilities = []corev1.Capability{
	"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "SETPCAP", "KILL", "NET_BIND_SERVICE",
}

// podName is the name of box id's Pod and Secret: unique per owner and
// namespace, so that the API server itself refuses a second Pod for an id.
func (p *Provider) podName(id string) string {
	if p.cfg.Owner == "astrabox" {
		return "abx-" + id
	}
	return "abx-" + shortHash(p.cfg.Owner) + "-" + id
}

func (p *Provider) labels(id string) map[string]string {
	return map[string]string{labelID: id, labelOwner: p.cfg.Owner, labelBackend: "kubernetes"}
}

func (p *Provider) selector() string {
	return labelOwner + "=" + p.cfg.Owner + "," + labelBackend + "=kubernetes"
}

// podSpec is the Pod of box id, hardened as the package documentation
// says.
func (p *Provider) podSpec(id string, spec sandbox.Spec) *corev1.Pod {
	res := spec.Resources.WithDefaults(p.cfg.Defaults)
	f, t := false, true
	root := int64(0)
	none := spec.Network.Mode == sandbox.NetworkNone
	// kube-init is PID 1 of the box container, as docker-init is of a
	// Docker box: it reaps orphans and keeps them in execd's session.
	execd := []string{boxBinary, "kube-init", "--exec", "--", boxBinary, "execd", "--listen", fmt.Sprintf(":%d", wire.DefaultPort),
		"--workdir", boxWorkspace, "--access-token-file", boxTokenDir + "/" + tokenKey, "--log-level", "warn"}
	initArgs := []string{"kube-init", "--install", boxBinary}
	initCaps := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	if none {
		initArgs = append(initArgs, "--drop-network")
		initCaps.Add = []corev1.Capability{"NET_ADMIN"}
	}
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	if p.cfg.SeccompProfile != "" {
		seccomp = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &p.cfg.SeccompProfile}
	}
	tmpBytes := min(res.DiskBytes, 256<<20)
	shmBytes := min(res.MemoryBytes/2, 64<<20)
	hostname := "box-" + id
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	podLabels := p.labels(id)
	podLabels[labelNetwork] = string(spec.Network.Mode)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        p.podName(id),
			Namespace:   p.cfg.Namespace,
			Labels:      podLabels,
			Annotations: map[string]string{annNetwork: string(spec.Network.Mode)},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			ShareProcessNamespace:         &f, // the box sees only its own processes
			Hostname:                      hostname,
			TerminationGracePeriodSeconds: new(int64),
			DNSPolicy:                     corev1.DNSDefault,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: seccomp,
				RunAsUser:      &root,
				RunAsGroup:     &root,
				RunAsNonRoot:   &f,
			},
			InitContainers: []corev1.Container{{
				Name:            initName,
				Image:           p.cfg.ExecdImage,
				ImagePullPolicy: corev1.PullPolicy(p.cfg.PullPolicy),
				Command:         []string{"/astrabox"},
				Args:            initArgs,
				VolumeMounts:    []corev1.VolumeMount{{Name: "astrabox", MountPath: boxHome}},
				Resources:       p.initResources(res),
				SecurityContext: &corev1.SecurityContext{
					Privileged:               &f,
					AllowPrivilegeEscalation: &f,
					ReadOnlyRootFilesystem:   &t,
					Capabilities:             initCaps,
				},
			}},
			Containers: []corev1.Container{{
				Name:            boxContainer,
				Image:           spec.Image,
				ImagePullPolicy: corev1.PullPolicy(p.cfg.PullPolicy),
				Command:         execd,
				Env:             boxEnv(spec.Env),
				WorkingDir:      boxWorkspace,
				Resources:       p.resources(res),
				SecurityContext: &corev1.SecurityContext{
					Privileged:               &f,
					AllowPrivilegeEscalation: &f,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: slices.Clone(boxCapabilities)},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "astrabox", MountPath: boxHome, ReadOnly: true},
					{Name: "token", MountPath: boxTokenDir, ReadOnly: true},
					{Name: "workspace", MountPath: boxWorkspace},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "shm", MountPath: "/dev/shm"},
				},
			}},
			Volumes: []corev1.Volume{
				memoryDir("astrabox", 256<<20),
				{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: p.podName(id), DefaultMode: ptr(int32(0o400))}}},
				memoryDir("workspace", res.DiskBytes),
				memoryDir("tmp", tmpBytes),
				memoryDir("shm", shmBytes),
			},
		},
	}
	rc := cmp.Or(spec.Runtime, p.cfg.RuntimeClass)
	if rc != "" {
		pod.Spec.RuntimeClassName = &rc
	}
	sel, tol := p.cfg.NodeSelector, p.cfg.Tolerations
	for _, c := range p.cfg.RuntimeClasses {
		if c.Name == rc && (len(c.NodeSelector) > 0 || len(c.Tolerations) > 0) {
			sel, tol = c.NodeSelector, c.Tolerations
		}
	}
	pod.Spec.NodeSelector = maps.Clone(sel)
	for _, t := range tol {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: t.Key, Value: t.Value,
			Operator: corev1.TolerationOperator(t.Operator), Effect: corev1.TaintEffect(t.Effect)})
	}
	return pod
}

// resources are the box container's limits, with RequestPercent of each
// requested. At 100 the Pod is Guaranteed and its containers get an
// oom_score_adj of -997, which execd raises to 0 for what it runs, so the
// kernel's OOM killer takes a box's hungry process before execd; a
// Burstable Pod's execd gets nearly 1000 and is taken first.
func (p *Provider) resources(r sandbox.Resources) corev1.ResourceRequirements {
	req := func(v int64) int64 { return max(v*int64(p.cfg.RequestPercent)/100, 1) }
	return corev1.ResourceRequirements{
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(r.MemoryBytes, resource.BinarySI),
		},
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(req(r.MilliCPU), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(req(r.MemoryBytes), resource.BinarySI),
		},
	}
}

// initResources bound the init container, which only copies the binary
// (its pages in the memory emptyDir are charged to it) and changes links:
// the box's CPU, and 256 MiB, requested as the box's limits are, so that
// a Pod whose box container is Guaranteed stays Guaranteed.
func (p *Provider) initResources(r sandbox.Resources) corev1.ResourceRequirements {
	return p.resources(sandbox.Resources{MilliCPU: r.MilliCPU, MemoryBytes: 256 << 20})
}

// memoryDir is a memory emptyDir (a tmpfs) of at most size bytes; the
// kubelet sizes the tmpfs by sizeLimit, and its pages count against the
// Pod's memory limit.
func memoryDir(name string, size int64) corev1.Volume {
	q := resource.NewQuantity(size, resource.BinarySI)
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: q}}}
}

// boxEnv is the environment of execd and what it runs: the image's, then
// these defaults, then the Spec's.
func boxEnv(extra map[string]string) []corev1.EnvVar {
	env := map[string]string{"HOME": "/root", "LANG": "C.UTF-8", "TERM": "xterm"}
	maps.Copy(env, extra)
	out := make([]corev1.EnvVar, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return out
}

// secretSpec is the Secret holding box id's access token, owned by its
// Pod once that exists (ownerUID non-empty).
func (p *Provider) secretSpec(id, token string, pod *corev1.Pod) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: p.podName(id), Namespace: p.cfg.Namespace, Labels: p.labels(id)},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{tokenKey: []byte(token)},
	}
	if pod != nil {
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// shortHash is a short hex hash of s, for names.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}
