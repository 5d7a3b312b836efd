package execd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"

	"github.com/astrabox/astrabox/execd/tunnelmux"
	"github.com/astrabox/astrabox/execd/wire"
)

// tunnel is one live tunnel: the in-box listener, the session over the
// WebSocket, and the connections being relayed.
type tunnel struct {
	log   *slog.Logger
	ln    *net.TCPListener
	sess  *tunnelmux.Session
	slots chan struct{} // one per relayed connection, at most wire.TunnelMaxConns
	wg    sync.WaitGroup

	mu     sync.Mutex
	conns  map[*net.TCPConn]struct{}
	closed bool // set once the session ended; no connection is tracked after
}

// runTunnel relays every connection accepted on ln over a session on ws
// until the session ends: the WebSocket closed or failed, ctx ended, or
// the client stopped answering keepalives. It then closes ln, resets every
// connection still relayed, and waits for the relays.
func runTunnel(ctx context.Context, log *slog.Logger, ln *net.TCPListener, ws *websocket.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer ws.CloseNow()
	sess, err := tunnelmux.New(ctx, ws, true, log)
	if err != nil {
		_ = ln.Close()
		log.Warn("tunnel session", "err", err)
		return
	}
	tn := &tunnel{log: log, ln: ln, sess: sess, slots: make(chan struct{}, wire.TunnelMaxConns), conns: make(map[*net.TCPConn]struct{})}
	tn.wg.Go(tn.acceptLoop)
	select {
	case <-sess.Done():
	case <-ctx.Done():
		// Ended from here (replaced by a new holder's tunnel, or execd
		// stopping): the peer may be frozen, so nothing waits on it.
		_ = ws.CloseNow()
	}
	_ = sess.Close()
	tn.shutdown()
	tn.wg.Wait()
}

// acceptLoop accepts in-box connections, at most wire.TunnelMaxConns being
// relayed at once, until the listener is closed.
func (tn *tunnel) acceptLoop() {
	var delay time.Duration
	for {
		select {
		case tn.slots <- struct{}{}:
		case <-tn.sess.Done():
			return
		}
		c, err := tn.ln.AcceptTCP()
		if err != nil {
			<-tn.slots
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, say: wait before trying again.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			tn.log.Warn("tunnel accept failed", "err", err, "retry_in", delay.String())
			select {
			case <-time.After(delay):
			case <-tn.sess.Done():
				return
			}
			continue
		}
		delay = 0
		if !tn.track(c) {
			<-tn.slots
			reset(c)
			return
		}
		tn.wg.Go(func() {
			defer func() { <-tn.slots }()
			defer tn.untrack(c)
			tn.relay(c)
		})
	}
}

// track records c for shutdown; false when the tunnel has already ended.
func (tn *tunnel) track(c *net.TCPConn) bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if tn.closed {
		return false
	}
	tn.conns[c] = struct{}{}
	return true
}

func (tn *tunnel) untrack(c *net.TCPConn) {
	tn.mu.Lock()
	delete(tn.conns, c)
	tn.mu.Unlock()
}

// shutdown closes the listener and resets every tracked connection.
func (tn *tunnel) shutdown() {
	_ = tn.ln.Close()
	tn.mu.Lock()
	tn.closed = true
	conns := make([]*net.TCPConn, 0, len(tn.conns))
	for c := range tn.conns {
		conns = append(conns, c)
	}
	tn.mu.Unlock()
	for _, c := range conns {
		reset(c)
	}
}

// relay opens a stream for in and pipes the two until both are done.
func (tn *tunnel) relay(in *net.TCPConn) {
	st, err := tn.sess.Open()
	if err != nil {
		reset(in)
		if !tn.sess.Ended() {
			tn.log.Warn("tunnel open stream", "remote_addr", in.RemoteAddr().String(), "err", err)
		}
		return
	}
	defer tn.sess.Release(st)
	tn.pipe(in, st)
}

// pipe copies between in and st in both directions until both are done. A
// direction that ends cleanly is passed on as a half-close (a FIN on the
// stream, CloseWrite on in), so the other keeps flowing. A failure on
// either side, or the end of the session, aborts both: in is reset, st is
// closed and its pending reads and writes are woken.
func (tn *tunnel) pipe(in *net.TCPConn, st *yamux.Stream) {
	var once sync.Once
	abort := func() {
		once.Do(func() {
			reset(in)
			_ = st.Close()
			_ = st.SetDeadline(time.Now())
		})
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := io.Copy(st, in); err != nil {
			abort()
			return
		}
		_ = st.Close() // the box is done sending
	})
	wg.Go(func() {
		// A stream of an ended session reads as EOF: that is no clean end.
		if _, err := io.Copy(in, st); err != nil || tn.sess.Ended() {
			abort()
			return
		}
		_ = in.CloseWrite() // the client is done sending
	})
	wg.Wait()
	_ = in.Close()
}

// reset closes c so that its peer sees a reset rather than an orderly end,
// which a truncated exchange must not look like.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}
