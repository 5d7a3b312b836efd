package execd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// The reverse tunnel (an addition, see wire.TunnelPath): GET
// /tunnel?listen=IP:PORT makes execd listen on a loopback address inside
// the box and hand every connection made to it to the client, as a yamux
// stream over the WebSocket the request upgrades to. It lets a program in
// a box without network reach a service of whoever reaches execd (the
// AstraBox server), which can always dial in but never be dialled.
//
// Access is what every execd route has: the access token, checked by
// Handler. Only loopback addresses can be listened on, so a tunnel never
// exposes anything beyond the box.

func (s *Server) registerTunnel() {
	t := &tunnelTable{log: s.log, live: make(map[netip.AddrPort]*liveTunnel)}
	s.mux.HandleFunc("GET "+wire.TunnelPath, t.handle)
}

// tunnelTable knows which addresses are tunnelled, so that a second tunnel
// on a live address is refused (or, asked to, replaces the first) before
// anything is bound.
type tunnelTable struct {
	log  *slog.Logger
	mu   sync.Mutex
	live map[netip.AddrPort]*liveTunnel
}

// liveTunnel is a tunnel being served: stop ends it, done is closed once
// its address is free again.
type liveTunnel struct {
	stop context.CancelFunc
	done chan struct{}
}

// replaceWait bounds how long a replacing tunnel waits for the one it
// ends to let go of the address.
const replaceWait = 5 * time.Second

// reserve marks addr as tunnelled by lt. When it is already, it fails with
// CodeConflict, or with replace ends that tunnel and waits until it let go.
func (t *tunnelTable) reserve(ctx context.Context, addr netip.AddrPort, lt *liveTunnel, replace bool) error {
	for {
		t.mu.Lock()
		old, ok := t.live[addr]
		if !ok {
			t.live[addr] = lt
			t.mu.Unlock()
			return nil
		}
		t.mu.Unlock()
		if !replace {
			return sandbox.Errorf(sandbox.CodeConflict, "%s is already tunnelled; close that tunnel first (or replace it)", addr)
		}
		old.stop()
		select {
		case <-old.done:
		case <-ctx.Done():
			return sandbox.Errorf(sandbox.CodeConflict, "%s: the request ended while the old tunnel was closing", addr)
		case <-time.After(replaceWait):
			return sandbox.Errorf(sandbox.CodeConflict, "%s: the old tunnel did not close within %v", addr, replaceWait)
		}
	}
}

func (t *tunnelTable) release(addr netip.AddrPort, lt *liveTunnel) {
	t.mu.Lock()
	if t.live[addr] == lt {
		delete(t.live, addr)
	}
	t.mu.Unlock()
	close(lt.done)
}

// handle serves GET /tunnel. It validates and binds the address before the
// upgrade, so that every refusal is an ordinary JSON error answer, then
// runs the tunnel until the WebSocket ends. The address is released only
// after the listener is closed and every relayed connection has ended.
func (t *tunnelTable) handle(w http.ResponseWriter, r *http.Request) {
	addr, err := parseTunnelListen(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	lt := &liveTunnel{stop: stop, done: make(chan struct{})}
	if err := t.reserve(r.Context(), addr, lt, r.URL.Query().Get(wire.TunnelReplaceParam) == "true"); err != nil {
		writeError(w, err)
		return
	}
	defer t.release(addr, lt)
	ln, err := listenTunnel(addr)
	if err != nil {
		writeError(w, err)
		return
	}
	// Origins are not checked, as for terminals: execd is reached through
	// an authenticated channel, behind the server's proxy.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		_ = ln.Close()
		t.log.Debug("tunnel websocket handshake failed", "listen", addr.String(), "err", err)
		return
	}
	t.log.Debug("tunnel opened", "listen", addr.String())
	runTunnel(ctx, t.log.With("listen", addr.String()), ln, conn)
	t.log.Debug("tunnel closed", "listen", addr.String())
}

// parseTunnelListen returns the in-box address of a tunnel request: an IP
// literal (no host name, no zone) that is a loopback address, and a port
// from 1 to 65535. Errors carry CodeMissingQuery or CodeInvalidRequest.
func parseTunnelListen(r *http.Request) (netip.AddrPort, error) {
	raw := r.URL.Query().Get(wire.TunnelListenParam)
	if raw == "" {
		return netip.AddrPort{}, sandbox.Errorf(sandbox.CodeMissingQuery,
			"query parameter %s is required: the loopback address to listen on in the sandbox, such as 127.0.0.1:8080", wire.TunnelListenParam)
	}
	ap, err := netip.ParseAddrPort(raw)
	if err != nil {
		return netip.AddrPort{}, sandbox.Errorf(sandbox.CodeInvalidRequest,
			"query parameter %s must be a loopback IP address and port, such as 127.0.0.1:8080 or [::1]:8080, got %q", wire.TunnelListenParam, raw)
	}
	ip := ap.Addr().Unmap()
	switch {
	case ip.Zone() != "":
		return netip.AddrPort{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "tunnel address %q must not have a zone", raw)
	case !ip.IsLoopback():
		return netip.AddrPort{}, sandbox.Errorf(sandbox.CodeInvalidRequest,
			"tunnel address %q is not a loopback address: a tunnel can only listen on 127.0.0.0/8 or ::1", raw)
	case ap.Port() == 0:
		return netip.AddrPort{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "tunnel address %q needs a port from 1 to 65535", raw)
	}
	return netip.AddrPortFrom(ip, ap.Port()), nil
}

// listenTunnel binds addr in the box. An address something already
// listens on is CodeConflict.
func listenTunnel(addr netip.AddrPort) (*net.TCPListener, error) {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
	switch {
	case err == nil:
		return ln, nil
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, sandbox.Errorf(sandbox.CodeConflict, "%s is already in use in the sandbox", addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "%s is not available in the sandbox (is its loopback interface up?)", addr)
	}
	return nil, sandbox.Errorf(sandbox.CodeRuntime, "listen on %s: %v", addr, err)
}
