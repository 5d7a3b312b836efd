package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"

	"github.com/astrabox/astrabox/execd/tunnelmux"
	"github.com/astrabox/astrabox/execd/wire"
)

// Tunnel opens a reverse tunnel (see wire.TunnelPath): execd listens on
// listen inside the box, a loopback IP address with a port, such as
// "127.0.0.1:8080" or "[::1]:8080", and every connection a program in the
// box makes to it arrives as a net.Conn from the returned listener's
// Accept. Serve it as any listener, for example with http.Server.Serve:
// this is how a box without network reaches a service outside it.
//
// ctx bounds the dial (the WebSocket handshake) only. Errors before the
// tunnel is up are *APIError: MISSING_QUERY or INVALID_REQUEST_BODY (400)
// for an address that is not a loopback IP with a non-zero port, CONFLICT
// (409) when the address is tunnelled already or in use in the box. A
// tunnel opened right after the previous one on the same address was closed
// can meet CONFLICT briefly, while execd finishes the old one: retry.
//
// Who closes what:
//   - The caller closes the listener. That ends the tunnel: execd closes
//     its in-box listener (new connections to the address are refused) and
//     resets every connection it relays; the accepted conns end too (their
//     reads and writes fail). Close is idempotent.
//   - The caller closes every accepted conn, as with any listener: the
//     program in the box reads end-of-file, and the stream is released
//     once the program has closed its end too (or is reset after
//     wire.TunnelHalfCloseTimeout). A conn must not be used after Close.
//   - Half-closes pass through both ways. An accepted conn has
//     CloseWrite() error, as *net.TCPConn does: it ends what is sent to
//     the box while what the program sends is still read. A program in
//     the box that half-closes its connection makes the conn's reads
//     return io.EOF while its writes still reach the program.
//   - If execd or the way to it goes away (the box is deleted, execd
//     stops answering keepalives), Accept returns an error and the conns
//     end; the listener must still be closed.
//
// Addr, and LocalAddr of every accepted conn, is the in-box address as
// given; RemoteAddr of a conn is that of the WebSocket and says nothing
// about the program in the box.
func (c *Client) Tunnel(ctx context.Context, listen string) (net.Listener, error) {
	return c.tunnel(ctx, listen, false)
}

// TakeTunnel is Tunnel that, when the address is tunnelled already, ends
// that tunnel and takes its place (wire.TunnelReplaceParam).
func (c *Client) TakeTunnel(ctx context.Context, listen string) (net.Listener, error) {
	return c.tunnel(ctx, listen, true)
}

func (c *Client) tunnel(ctx context.Context, listen string, replace bool) (net.Listener, error) {
	q := url.Values{wire.TunnelListenParam: {listen}}
	if replace {
		q.Set(wire.TunnelReplaceParam, "true")
	}
	ws, err := c.dialWebSocket(ctx, wire.TunnelPath+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	// The session outlives ctx: it ends with Close, or with the WebSocket.
	life, cancel := context.WithCancel(context.Background())
	sess, err := tunnelmux.New(life, ws, false, nil)
	if err != nil {
		cancel()
		_ = ws.CloseNow()
		return nil, fmt.Errorf("tunnel %s: %w", listen, err)
	}
	return &tunnelListener{ws: ws, sess: sess, cancel: cancel, addr: tunnelAddr(listen), closed: make(chan struct{})}, nil
}

// tunnelListener is the client's end of a tunnel. It is safe for
// concurrent use.
type tunnelListener struct {
	ws     *websocket.Conn
	sess   *tunnelmux.Session
	cancel context.CancelFunc
	addr   tunnelAddr

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
	closeErr  error
}

// Accept waits for the next connection made in the box. After Close it
// returns an error that matches net.ErrClosed; after the tunnel ended
// otherwise, one that names the cause.
func (l *tunnelListener) Accept() (net.Conn, error) {
	st, err := l.sess.Accept()
	if err == nil {
		return &tunnelConn{Stream: st, sess: l.sess, local: l.addr}, nil
	}
	select {
	case <-l.closed:
		return nil, fmt.Errorf("tunnel %s: %w", l.addr, net.ErrClosed)
	default:
	}
	return nil, fmt.Errorf("tunnel %s ended: %w", l.addr, err)
}

// Close ends the tunnel (see Client.Tunnel). It performs the WebSocket's
// closing handshake, which waits a few seconds at most for execd, while
// the session still runs, so that everything written before reaches execd;
// then it closes the session, which ends the accepted conns.
func (l *tunnelListener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		err := l.ws.Close(websocket.StatusNormalClosure, "")
		_ = l.sess.Close()
		l.cancel()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			l.closeErr = fmt.Errorf("close tunnel %s: %w", l.addr, err)
		}
	})
	return l.closeErr
}

// Addr is the address the tunnel listens on in the box.
func (l *tunnelListener) Addr() net.Addr { return l.addr }

// tunnelAddr is the in-box address of a tunnel, as it was asked for.
type tunnelAddr string

func (tunnelAddr) Network() string  { return "tcp" }
func (a tunnelAddr) String() string { return string(a) }

// tunnelConn is one connection made in the box: a yamux stream, whose own
// Close only ends what is sent (CloseWrite here).
type tunnelConn struct {
	*yamux.Stream
	sess      *tunnelmux.Session
	local     tunnelAddr
	closeOnce sync.Once
}

// CloseWrite ends what is sent to the box; reads go on.
func (c *tunnelConn) CloseWrite() error { return c.Stream.Close() }

// Close ends what is sent to the box and gives the conn up: the stream is
// released once the program in the box has closed its end too.
func (c *tunnelConn) Close() error {
	err := c.Stream.Close()
	c.closeOnce.Do(func() { c.sess.Release(c.Stream) })
	return err
}

// LocalAddr is the in-box address the program connected to.
func (c *tunnelConn) LocalAddr() net.Addr { return c.local }
