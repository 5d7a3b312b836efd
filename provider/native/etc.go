package native

import "fmt"

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
var hostEtcBinds = []string{"/etc/ssl", "/etc/ca-certificates", "/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"}
