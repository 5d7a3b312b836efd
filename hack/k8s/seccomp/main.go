// Command seccomp prints the kubernetes backend's recommended Localhost
// seccomp profile (kubernetes.SeccompProfile), which hack/k8s/cluster.sh
// installs on the test node and operators install on theirs.
package main

import (
	"fmt"
	"os"

	"github.com/astrabox/astrabox/provider/kubernetes"
)

func main() {
	b, err := kubernetes.SeccompProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(append(b, '\n'))
}
