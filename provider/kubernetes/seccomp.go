package kubernetes

import (
	"encoding/json"
	"fmt"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// SeccompProfile is the Localhost seccomp profile this package recommends
// for boxes (Config.SeccompProfile names where the nodes keep it): the
// Docker Engine's current default profile (an allow-list that refuses
// io_uring, bpf, perf_event_open, userfaultfd, keyctl, mount, unshare,
// clock changes, ... and answers clone3 with ENOSYS), evaluated for the
// capabilities a box's root keeps, in the OCI runtime's format that
// containerd and CRI-O read for Localhost profiles. Older runtimes'
// RuntimeDefault profiles (containerd before 1.7) still allow io_uring.
func SeccompProfile() ([]byte, error) {
	caps := make([]string, len(boxCapabilities))
	for i, c := range boxCapabilities {
		caps[i] = "CAP_" + string(c)
	}
	rs := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
		Bounding: caps, Effective: caps, Permitted: caps}}}
	p, err := seccomp.GetDefaultProfile(rs)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	return b, nil
}
