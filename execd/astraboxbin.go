package execd

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/astrabox/astrabox/execd/wire"
)

// boxBinary is where the docker and native backends bind the astrabox
// binary into a box.
const boxBinary = "/.astrabox/astrabox"

// selfPath is execd's executable as os.Executable reports it: resolved
// when the process starts, so in the file system of whoever started it.
// A native box's init starts on the host and only then enters the box's
// root, where that path does not exist.
var selfPath, _ = os.Executable()

// withAstraboxBin returns a copy of env with wire.EnvAstraboxBin set to a
// path of execd's own running executable in the file system execd serves:
// the first of env's own value (a backend may pass the path), selfPath and
// boxBinary that names it. Without one, the variable is removed: no value
// beats a wrong one.
func withAstraboxBin(env []string) []string {
	var inherited string
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == wire.EnvAstraboxBin {
			inherited = v
			continue
		}
		out = append(out, kv)
	}
	if bin := runningExecutable("/proc/self/exe", inherited, selfPath, boxBinary); bin != "" {
		out = append(out, wire.EnvAstraboxBin+"="+bin)
	}
	return out
}

// runningExecutable returns the first of candidates that is an absolute
// path naming the same file as self (the /proc/self/exe link), or "". When
// self cannot be read (no /proc), the first candidate that is an
// executable regular file is taken.
func runningExecutable(self string, candidates ...string) string {
	want, selfErr := os.Stat(self)
	for _, c := range candidates {
		if c == "" || !filepath.IsAbs(c) {
			continue
		}
		fi, err := os.Stat(c)
		if err != nil {
			continue
		}
		if selfErr == nil && os.SameFile(fi, want) {
			return filepath.Clean(c)
		}
		if selfErr != nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return filepath.Clean(c)
		}
	}
	return ""
}
