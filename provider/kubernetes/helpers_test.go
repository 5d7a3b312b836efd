package kubernetes

import (
	"time"

	"k8s.io/client-go/rest"

	"github.com/astrabox/astrabox/execd/wire"
)

// fakeRest is a client configuration that reaches nothing, for tests that
// only build objects.
func fakeRest() *rest.Config { return &rest.Config{Host: "https://127.0.0.1:1"} }

func runReq(cmd string) wire.RunCommandRequest { return wire.RunCommandRequest{Command: cmd} }

func sleepShort() { time.Sleep(100 * time.Millisecond) }
