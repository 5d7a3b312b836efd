package sandboxtest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// tunnelRequest is run in the box: an HTTP/1.0 request to the tunnel's
// port with nothing but bash (its /dev/tcp), printing the whole answer.
// The port comes in TUNNEL_PORT, the path in TUNNEL_PATH.
const tunnelRequest = `exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/$TUNNEL_PORT && printf "GET /$TUNNEL_PATH HTTP/1.0\r\n\r\n" >&3 && cat <&3'`

// testTunnel opens a reverse tunnel into a box, with no network where the
// backend offers that, serves HTTP on it from the test, and requests it
// from inside the box; then checks that closing the tunnel refuses new
// connections, and that a program in the box can run the astrabox binary
// through ASTRABOX_BIN (as `"$ASTRABOX_BIN" agent` does, which reaches its
// model through such a tunnel).
func testTunnel(t *testing.T, h Harness) {
	spec := h.Spec()
	if slices.Contains(h.Provider().Capabilities().NetworkModes, sandbox.NetworkNone) {
		spec.Network.Mode = sandbox.NetworkNone
	}
	b := NewBox(t, h, &spec)

	l, port := tunnelOpen(t, b)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tunnel served %s", r.URL.Path)
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})

	t.Run("RequestFromTheBox", func(t *testing.T) {
		path := "marker-" + NewID()
		ex := tunnelRun(t, b, port, path)
		out := string(ex.Stdout)
		if ex.ExitCode != 0 || !strings.HasPrefix(out, "HTTP/1.0 200 OK") || !strings.HasSuffix(out, "tunnel served /"+path) {
			t.Fatalf("request through the tunnel: exit %d, stdout %q, stderr %q", ex.ExitCode, out, ex.Stderr)
		}
	})

	t.Run("ClosedTunnelRefuses", func(t *testing.T) {
		if err := l.Close(); err != nil {
			t.Fatalf("close the tunnel: %v", err)
		}
		eventually(t, time.Minute, "connections to the closed tunnel to be refused", func() bool {
			return tunnelRun(t, b, port, "after-close").ExitCode != 0
		})
	})

	t.Run("AstraboxBinRuns", func(t *testing.T) {
		out := mustRun(t, b, `"$`+wire.EnvAstraboxBin+`" version`)
		if !strings.HasPrefix(out, "astrabox ") {
			t.Fatalf(`"$%s" version printed %q, want "astrabox <version>"`, wire.EnvAstraboxBin, out)
		}
	})
}

// tunnelOpen opens a tunnel on a random loopback port of the box, trying
// another port while one is taken (CONFLICT).
func tunnelOpen(t *testing.T, b *Box) (net.Listener, int) {
	t.Helper()
	for range 20 {
		port := 20000 + rand.IntN(40000)
		l, err := b.Client.Tunnel(ctxFor(t, time.Minute), "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			t.Cleanup(func() { _ = l.Close() })
			return l, port
		}
		if client.CodeOf(err) != sandbox.CodeConflict {
			t.Fatalf("open a tunnel on port %d: %v", port, err)
		}
	}
	t.Fatal("open a tunnel: every port tried was taken")
	return nil, 0
}

// tunnelRun runs tunnelRequest in b for path.
func tunnelRun(t *testing.T, b *Box, port int, path string) *client.Execution {
	t.Helper()
	ex, err := b.Client.Run(ctxFor(t, time.Minute), wire.RunCommandRequest{
		Command: tunnelRequest,
		Envs:    map[string]string{"TUNNEL_PORT": strconv.Itoa(port), "TUNNEL_PATH": path},
	})
	if err != nil {
		t.Fatalf("run the request in the box: %v", err)
	}
	return ex
}
