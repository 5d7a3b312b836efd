// Command pause is the pod sandbox ("pause") container of the offline test
// cluster (hack/k8s/cluster.sh), which cannot pull registry.k8s.io/pause:
// it sleeps until SIGTERM or SIGINT and, as PID 1 of a pod that shares its
// process namespace, reaps every orphan it inherits.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
