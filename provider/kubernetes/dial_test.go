package kubernetes

import (
	"io"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// TestRefusedPairRetiresConnection: a stream pair the kubelet refuses (no
// one listens on the port) retires the Pod's port-forward connection, so
// that later dials get a fresh one (the refused pair's unread data would
// hold up streams that share a frame worker with it at the far end) and
// it closes after the streams it carries; the box is reached all along.
func TestRefusedPairRetiresConnection(t *testing.T) {
	h := newHarness(t, nil)
	b := sandboxtest.NewBox(t, h, nil)
	pod := h.p.podName(b.ID)
	f, _, err := h.p.forwarder(ctx(t), pod)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.dial(1) // nothing listens on port 1 in the box
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_, err = io.ReadAll(c)
	c.Close()
	if err == nil || !strings.Contains(err.Error(), "port-forward") {
		t.Fatalf("a pair to a closed port: %v, want the kubelet's error", err)
	}
	h.p.mu.Lock()
	now := h.p.fwd[pod]
	h.p.mu.Unlock()
	if now == f {
		t.Fatal("the connection that carried a refused pair is still given to new dials")
	}
	for range 5 {
		if err := b.Client.Ping(ctx(t)); err != nil {
			t.Fatalf("ping after the refused pair: %v", err)
		}
	}
	f.mu.Lock()
	retired := f.retired
	f.mu.Unlock()
	if !retired {
		t.Fatal("the connection is not retired (it would stay open after its last stream)")
	}
}
