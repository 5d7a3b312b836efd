package kubernetes

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestConformance runs the whole conformance suite on the cluster.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, newHarness(t, nil))
}

// TestStartFailures checks that a box whose Pod cannot start fails Create
// with the cluster's reason and its code, and leaves nothing behind.
func TestStartFailures(t *testing.T) {
	h := newHarness(t, nil)
	for _, tt := range []struct {
		name string
		spec func(*sandbox.Spec)
		code sandbox.Code
		want string
	}{
		{"image not on the node", func(s *sandbox.Spec) { s.Image = "astrabox.local/missing:1" }, sandbox.CodeImageNotFound, "ErrImageNeverPull"},
		{"unschedulable", func(s *sandbox.Spec) { s.Resources.MemoryBytes = 1 << 50 }, sandbox.CodeUnavailable, "unschedulable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := h.Spec()
			tt.spec(&spec)
			if tt.code == sandbox.CodeUnavailable {
				// An unschedulable Pod may yet be placed (an autoscaler
				// adds a node): Create waits StartTimeout for it.
				h.p.cfg.StartTimeout = 5 * time.Second
				defer func() { h.p.cfg.StartTimeout = 2 * time.Minute }()
			}
			id := sandboxtest.NewID()
			_, err := h.p.Create(ctx(t), id, spec)
			if code := sandbox.CodeOf(err); code != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("create: %v (code %s), want %s naming %q", err, code, tt.code, tt.want)
			}
			if _, err := h.p.Inspect(ctx(t), id); !errors.Is(err, sandbox.ErrNotFound) {
				t.Fatalf("inspect after a failed create: %v", err)
			}
			h.CheckGone(t, id)
		})
	}
}

// TestOOMKilledBox checks that a box whose execd is killed for memory is
// reported Failed with the reason.
func TestOOMKilledBox(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.Spec()
	spec.Resources = sandbox.Resources{MemoryBytes: 64 << 20, DiskBytes: 256 << 20}
	b := sandboxtest.NewBox(t, h, &spec)
	// Filling the memory emptyDir charges the Pod's cgroup, which the
	// kernel then relieves by killing its largest process, execd.
	_, _ = b.Client.Run(ctx(t), runReq("head -c 200M /dev/zero > /workspace/fill; sleep 5"))
	deadline := 200
	for i := 0; ; i++ {
		info, err := h.p.Inspect(ctx(t), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == sandbox.StateFailed {
			if !strings.Contains(info.Reason, "out of memory") {
				t.Fatalf("failed for %q, want out of memory", info.Reason)
			}
			return
		}
		if i == deadline {
			t.Skipf("execd survived the fill (%s): the kernel killed something else", info.State)
		}
		sleepShort()
	}
}

// TestPodSpecHardening checks the Pod of a box without a cluster.
func TestPodSpecHardening(t *testing.T) {
	p, err := New(Config{ExecdImage: "astrabox.local/execd:1", rest: fakeRest(), RuntimeClass: "gvisor",
		RuntimeClasses: []RuntimeClass{{Name: "kata", NodeSelector: map[string]string{"pool": "vms"}, Tolerations: []Toleration{{Key: "vm", Operator: "Exists"}}}},
		NodeSelector:   map[string]string{"pool": "boxes"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		network sandbox.NetworkMode
		runtime string
		initCap []corev1.Capability
		rc      string
		pool    string
		tol     int
	}{
		{"none", sandbox.NetworkNone, "", []corev1.Capability{"NET_ADMIN"}, "gvisor", "boxes", 0},
		{"unrestricted", sandbox.NetworkUnrestricted, "kata", nil, "kata", "vms", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := p.podSpec("abc", sandbox.Spec{Image: "debian", Network: sandbox.NetworkPolicy{Mode: tt.network}, Runtime: tt.runtime})
			s := pod.Spec
			if *s.AutomountServiceAccountToken || *s.EnableServiceLinks || *s.ShareProcessNamespace || s.HostNetwork || s.HostPID || s.HostIPC {
				t.Fatalf("pod-level hardening missing: %+v", s)
			}
			if s.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Fatalf("seccomp %v", s.SecurityContext.SeccompProfile)
			}
			if s.RuntimeClassName == nil || *s.RuntimeClassName != tt.rc || s.NodeSelector["pool"] != tt.pool || len(s.Tolerations) != tt.tol {
				t.Fatalf("placement: %v %v %v", s.RuntimeClassName, s.NodeSelector, s.Tolerations)
			}
			for _, v := range s.Volumes {
				if v.HostPath != nil {
					t.Fatalf("volume %s is a host path", v.Name)
				}
			}
			box := s.Containers[0]
			sc := box.SecurityContext
			if *sc.Privileged || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
				!slices.Equal(sc.Capabilities.Add, boxCapabilities) {
				t.Fatalf("box security context %+v", sc)
			}
			if !slices.ContainsFunc(box.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == boxHome && m.ReadOnly }) {
				t.Fatal("the execd binary is not mounted read-only")
			}
			init := s.InitContainers[0]
			if !slices.Equal(init.SecurityContext.Capabilities.Add, tt.initCap) || *init.SecurityContext.AllowPrivilegeEscalation {
				t.Fatalf("init container capabilities %+v", init.SecurityContext.Capabilities)
			}
			if init.ImagePullPolicy != corev1.PullIfNotPresent || box.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Fatal("the backend must never force a pull")
			}
		})
	}
}

// TestObserved maps Pod statuses onto states.
func TestObserved(t *testing.T) {
	now := metav1.Now()
	running := corev1.ContainerStatus{Name: boxContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	for _, tt := range []struct {
		name   string
		pod    corev1.Pod
		state  sandbox.State
		reason string
	}{
		{"scheduling", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, sandbox.StatePending, ""},
		{"unschedulable", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes: Insufficient memory"}}}},
			sandbox.StatePending, "unschedulable: 0/1 nodes: Insufficient memory"},
		{"image pull", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: boxContainer,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "back-off"}}}}}},
			sandbox.StatePending, "image cannot be pulled (ImagePullBackOff): back-off"},
		{"running", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running}}}, sandbox.StateRunning, ""},
		{"oom", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: boxContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}},
			sandbox.StateFailed, "oom_killed: box container was killed out of memory (exit code 137)"},
		{"exited", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: boxContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}}},
			sandbox.StateFailed, "box_exited: box container exited with code 2 (Error)"},
		{"init failed", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: initName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}},
			sandbox.StateFailed, "init container astrabox-init exited 1 (Error): "},
		{"evicted", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}}, sandbox.StateFailed, "pod Failed (Evicted): low on memory"},
		{"deleting", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{running}}}, sandbox.StateStopping, "being deleted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state, reason := observed(&tt.pod)
			if state != tt.state || reason != tt.reason {
				t.Fatalf("observed %s %q, want %s %q", state, reason, tt.state, tt.reason)
			}
		})
	}
}

// TestValidID refuses ids that are no Pod name or label value.
func TestValidID(t *testing.T) {
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{"abc123", true}, {"a-b", true}, {"", false}, {"Abc", false}, {"a_b", false}, {"a.b", false},
		{"-a", false}, {"a-", false}, {strings.Repeat("a", 63), true}, {strings.Repeat("a", 64), false}, {"../x", false},
	} {
		if err := validID(tt.id); (err == nil) != tt.ok {
			t.Errorf("validID(%q) = %v, want ok %t", tt.id, err, tt.ok)
		}
	}
}
