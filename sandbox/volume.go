package sandbox

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Volume is a storage mount of a box: a host directory (HostPath) or a
// named volume of the backend (Claim), or a directory under either
// (SubPath), mounted at MountPath.
//
// A named volume is created on first use (unless MustExist) and outlives
// every box that mounts it: deleting a box never removes one, only
// Volumer.DeleteVolume does. Files in a volume keep the owners the box
// sees (uid 0 in the box is 0 in the volume, whichever host uids the box
// runs as), so a file one box writes has the same owner in the next.
//
// A host path must lie under a root the server allows; backends resolve
// it, and SubPath, without following a symbolic link anywhere on the way
// (a link is refused, not followed), so a volume never reaches beyond the
// directory it names.
type Volume struct {
	// Name identifies the volume within the Spec: a DNS label.
	Name string `json:"name"`
	// HostPath is an absolute, clean host directory.
	HostPath string `json:"hostPath,omitempty"`
	// Claim names a named volume of the backend (see ValidateVolumeName).
	Claim string `json:"claim,omitempty"`
	// MustExist refuses a Claim that does not exist yet instead of
	// creating it (CodeNotFound).
	MustExist bool `json:"mustExist,omitempty"`
	// MountPath is where the box sees it: absolute and clean, not / and
	// not under /proc, /sys, /dev or /.astrabox.
	MountPath string `json:"mountPath"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `json:"readOnly,omitempty"`
	// SubPath is a relative path of an existing directory in the volume
	// to mount instead of its root ("" for the root), without "..".
	SubPath string `json:"subPath,omitempty"`
}

// maxVolumes bounds the volumes of one Spec.
const maxVolumes = 16

// reservedMountPaths are where a volume may not be mounted: the box's
// kernel file systems and AstraBox's own directory.
var reservedMountPaths = []string{"/proc", "/sys", "/dev", "/.astrabox"}

// ValidateVolumeName accepts the names of volumes and named volumes: a
// DNS label (lower-case letters, digits and '-', neither first nor last),
// 1 to 63 bytes.
func ValidateVolumeName(name string) error {
	if !dnsLabel(name) {
		return Errorf(CodeInvalidRequest, "invalid volume name %q (a DNS label: 1 to 63 lower-case letters, digits or '-', not first or last)", name)
	}
	return nil
}

func dnsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '-' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// CleanSubPath checks a SubPath and returns it in its canonical form: ""
// for the volume's root, otherwise a clean relative slash path with no
// ".." component, no NUL and at most 1024 bytes. Errors carry
// CodeInvalidRequest.
func CleanSubPath(sub string) (string, error) {
	if sub == "" || sub == "." {
		return "", nil
	}
	if len(sub) > 1024 || strings.IndexByte(sub, 0) >= 0 {
		return "", Errorf(CodeInvalidRequest, "subPath must be at most 1024 bytes without NUL")
	}
	if strings.HasPrefix(sub, "/") {
		return "", Errorf(CodeInvalidRequest, "subPath %q must be relative", sub)
	}
	for _, part := range strings.Split(sub, "/") {
		if part == ".." {
			return "", Errorf(CodeInvalidRequest, "subPath %q must not contain '..'", sub)
		}
	}
	clean := path.Clean(sub)
	if clean == "." {
		return "", nil
	}
	return clean, nil
}

// checkAbsPath checks an absolute path of a volume: clean, no "..", no
// NUL, at most 1024 bytes.
func checkAbsPath(what, p string) error {
	if p == "" || p[0] != '/' || len(p) > 1024 || strings.IndexByte(p, 0) >= 0 {
		return Errorf(CodeInvalidRequest, "%s %q must be an absolute path of at most 1024 bytes", what, p)
	}
	if path.Clean(p) != p || slices.Contains(strings.Split(p, "/"), "..") {
		return Errorf(CodeInvalidRequest, "%s %q must be clean (no '.', '..', '//' or trailing '/')", what, p)
	}
	return nil
}

// validateVolumes checks the volumes of a Spec and canonicalises their
// SubPaths: names unique, exactly one source each, mount paths distinct,
// none reserved.
func validateVolumes(vols []Volume) error {
	if len(vols) > maxVolumes {
		return Errorf(CodeInvalidRequest, "at most %d volumes, got %d", maxVolumes, len(vols))
	}
	names, mounts := map[string]bool{}, map[string]bool{}
	for i := range vols {
		v := &vols[i]
		if err := ValidateVolumeName(v.Name); err != nil {
			return err
		}
		if names[v.Name] {
			return Errorf(CodeInvalidRequest, "volume name %q appears twice", v.Name)
		}
		names[v.Name] = true
		switch {
		case (v.HostPath == "") == (v.Claim == ""):
			return Errorf(CodeInvalidRequest, "volume %q must have exactly one source (a host path or a named volume)", v.Name)
		case v.HostPath != "":
			if err := checkAbsPath("host path of volume "+v.Name, v.HostPath); err != nil {
				return err
			}
			if v.MustExist {
				return Errorf(CodeInvalidRequest, "volume %q: mustExist applies to named volumes only", v.Name)
			}
		default:
			if err := ValidateVolumeName(v.Claim); err != nil {
				return err
			}
		}
		if err := checkAbsPath("mount path of volume "+v.Name, v.MountPath); err != nil {
			return err
		}
		if v.MountPath == "/" {
			return Errorf(CodeInvalidRequest, "volume %q cannot be mounted on /", v.Name)
		}
		for _, r := range reservedMountPaths {
			if v.MountPath == r || strings.HasPrefix(v.MountPath, r+"/") {
				return Errorf(CodeInvalidRequest, "volume %q cannot be mounted under %s", v.Name, r)
			}
		}
		if mounts[v.MountPath] {
			return Errorf(CodeInvalidRequest, "mount path %s appears twice", v.MountPath)
		}
		mounts[v.MountPath] = true
		sub, err := CleanSubPath(v.SubPath)
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		v.SubPath = sub
	}
	return nil
}

// VolumesInMountOrder returns vols sorted so that a mount path comes
// after every mount path it lies under.
func VolumesInMountOrder(vols []Volume) []Volume {
	out := slices.Clone(vols)
	slices.SortStableFunc(out, func(a, b Volume) int { return strings.Compare(a.MountPath, b.MountPath) })
	return out
}

// HostPathUnder reports whether the clean absolute path p is root or lies
// under it.
func HostPathUnder(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// VolumeInfo describes a named volume.
type VolumeInfo struct {
	Name      string    `json:"name"`
	Backend   string    `json:"backend"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// InUse lists the boxes that mount it now.
	InUse []string `json:"inUse,omitempty"`
}

// Volumer is implemented by providers that keep named volumes
// (Capabilities.PersistentWorkspace).
type Volumer interface {
	// ListVolumes returns the provider's named volumes by name.
	ListVolumes(ctx context.Context) ([]VolumeInfo, error)
	// DeleteVolume removes named volume name and its files. A volume a box
	// mounts is CodeConflict; an unknown one CodeNotFound; an invalid name
	// CodeInvalidRequest.
	DeleteVolume(ctx context.Context, name string) error
}
