package testenv

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// DockerSocket is the local Docker Engine socket that NeedDocker probes.
const DockerSocket = "/var/run/docker.sock"

// NeedDocker requires a Docker Engine answering on DockerSocket.
func NeedDocker(t testing.TB) {
	t.Helper()
	Need(t, dockerAnswers(), "a Docker Engine on "+DockerSocket)
}

// dockerAnswers pings the engine's API on its unix socket.
func dockerAnswers() bool {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", DockerSocket)
		},
	}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
