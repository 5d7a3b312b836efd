package native

import (
	"fmt"
	"path/filepath"
)

// boxEtc is what a box of an imported image gets written into its /etc
// (its own layer): its name and its name resolution.
func boxEtc(hostname, resolv string) map[string]string {
	return map[string]string{
		"hosts":       fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n", hostname),
		"hostname":    hostname + "\n",
		"resolv.conf": resolv,
	}
}

// hostImageEtc is the generated /etc of a box on the host image: a root
// and a nobody user, the box's name and name resolution.
func hostImageEtc(hostname, resolv string) map[string]string {
	return map[string]string{
		"passwd":        "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":         "root:x:0:\ntty:x:5:\nnogroup:x:65534:\n",
		"hosts":         fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n", hostname),
		"hostname":      hostname + "\n",
		"resolv.conf":   resolv,
		"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
		"shells":        "/bin/sh\n/bin/bash\n",
	}
}

// hostEtcBinds are host /etc entries a box on the host image sees
// read-only: TLS roots, the dynamic linker cache and alternatives links.
var hostEtcBinds = []string{"ssl", "ca-certificates", "ld.so.cache", "alternatives", "localtime"}

// hostEtcGlobs are patterns of further host /etc entries the host's
// programs read their configuration from: the JDKs' (Debian's JDK links
// its conf/ to /etc/java-<version>-openjdk; a JVM without it dies loading
// java.security).
var hostEtcGlobs = []string{"java-*"}

// hostEtc lists the entries of etcDir (the host's /etc) bound read-only
// into a box on the host image: hostEtcBinds and what hostEtcGlobs match
// now. Entries that do not exist are skipped when bound.
func hostEtc(etcDir string) []string {
	out := make([]string, 0, len(hostEtcBinds)+1)
	for _, name := range hostEtcBinds {
		out = append(out, filepath.Join(etcDir, name))
	}
	for _, g := range hostEtcGlobs {
		m, _ := filepath.Glob(filepath.Join(etcDir, g)) // the patterns are valid
		out = append(out, m...)
	}
	return out
}
