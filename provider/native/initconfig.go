package native

// File descriptors a box's init receives from the host, after stdio.
const (
	fdConfig   = 3 // JSON initConfig, then EOF
	fdSync     = 4 // one byte once the host has placed init in its cgroups
	fdListener = 5 // listening unix socket for execd, bound on the host side
	fdToken    = 6 // execd access token, then EOF
	// fdImage is a unix socket on which the host sends, for an imported
	// image, one message carrying the image's root as a detached,
	// read-only mount idmapped to the box's user namespace, then one
	// message per volume carrying its mount (see volumes.go).
	fdImage = 7
	// fdLog is the box's output log on the host, which init alone writes
	// (see outputlog.go).
	fdLog = 8
	// fdDeadline is the box's deadline file on the host, read-only (see
	// deadline.go).
	fdDeadline = 9
	// fdLayer is where init keeps its root tmpfs open (see keepLayer).
	fdLayer = 1000
)

// Where things are inside a box.
const (
	boxBinary    = "/.astrabox/astrabox"
	boxWorkspace = "/workspace"
)

// initConfig is what the host tells a box's init.
type initConfig struct {
	ID       string `json:"id"`
	Hostname string `json:"hostname"`
	// Root is the host directory (empty) on which init mounts the box's
	// root file system, in its own mount namespace.
	Root string `json:"root"`
	// HostImage means the host's /usr with a generated /etc; otherwise the
	// image arrives on fdImage and becomes the overlay's lower layer.
	HostImage bool `json:"hostImage"`
	// Binary is the host path of the astrabox binary bound into the box.
	Binary string `json:"binary"`
	// HostEtc lists host files and directories bound read-only into the
	// box's /etc (CA certificates, ld.so.cache, alternatives).
	HostEtc []string `json:"hostEtc,omitempty"`
	// Etc holds generated /etc files by name.
	Etc map[string]string `json:"etc,omitempty"`
	// Sizes of the writable file systems in bytes.
	DiskBytes int64 `json:"diskBytes"`
	TmpBytes  int64 `json:"tmpBytes"`
	ShmBytes  int64 `json:"shmBytes"`
	// CgroupDirs are the host directories of the box's own cgroups by v1
	// controller ("" for the v2 group), bound read-only into the box's
	// /sys/fs/cgroup so that execd reports the box's limits and usage.
	CgroupDirs map[string]string `json:"cgroupDirs,omitempty"`
	// Env is the environment of execd and the entrypoint.
	Env        []string `json:"env"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	// TrustCA, when set, is the egress proxy's CA (PEM), which init
	// installs in the box (trust.Write) before it serves execd or
	// starts the entrypoint: a box created with CredentialProxy.
	TrustCA []byte `json:"trustCA,omitempty"`
	// Volumes are the box's volumes in the order their mounts arrive on
	// fdImage (mount order: a path after those it lies under).
	Volumes []initVolume `json:"volumes,omitempty"`
}

// initVolume is a volume as init attaches it.
type initVolume struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
}
