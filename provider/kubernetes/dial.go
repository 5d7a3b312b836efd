package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// Dial implements sandbox.Provider: a stream of the API server's
// port-forward to execd's port in the box's Pod (one upgraded connection
// per Pod, shared by all streams to it), or, with Config.Direct, a TCP
// connection to the Pod's IP.
func (p *Provider) Dial(ctx context.Context, id string) (net.Conn, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	p.mu.Lock()
	st, ok := p.states[id]
	p.mu.Unlock()
	if !ok {
		info, err := p.inspect(ctx, id)
		if err != nil {
			return nil, err
		}
		if info.State != sandbox.StateRunning {
			return nil, sandbox.Errorf(sandbox.CodeUnavailable, "box %s is %s: %s", id, info.State, info.Reason)
		}
		if st, err = decodeState(id, info.StateBlob); err != nil {
			return nil, err
		}
	}
	return p.dialState(ctx, id, st)
}

func (p *Provider) dialState(ctx context.Context, id string, st boxState) (net.Conn, error) {
	if p.cfg.Direct && st.Network != sandbox.NetworkNone && st.PodIP != "" {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(st.PodIP, strconv.Itoa(wire.DefaultPort)))
		if err != nil {
			return nil, fmt.Errorf("dial box %s: %w", id, err)
		}
		return c, nil
	}
	// A shared connection may have died unnoticed (the API server or the
	// kubelet restarted, a proxy timed it out), when opening a stream on
	// it waits for an answer that never comes: a reused connection gets
	// reusedStreamWait to answer, then one fresh try.
	for try := 0; ; try++ {
		f, fresh, err := p.forwarder(ctx, st.Pod)
		if err != nil {
			return nil, fmt.Errorf("dial box %s: %w", id, err)
		}
		wait := time.Duration(0)
		if !fresh && try == 0 {
			wait = reusedStreamWait
		}
		c, err := f.dialWithin(wire.DefaultPort, wait)
		if err == nil {
			return c, nil
		}
		if errors.Is(err, errStreamWait) {
			// Slow or stale: new dials get a fresh connection; this one
			// stays for the streams it carries and closes after them.
			p.retireForwarder(st.Pod, f)
		} else {
			p.dropForwarder(st.Pod)
		}
		if try == 1 || ctx.Err() != nil {
			return nil, fmt.Errorf("dial box %s: %w", id, err)
		}
	}
}

// remember keeps what Dial needs of a running box; forget drops it.
func (p *Provider) remember(id string, st boxState) {
	p.mu.Lock()
	p.states[id] = st
	p.mu.Unlock()
}

func (p *Provider) forget(id string) {
	p.mu.Lock()
	delete(p.states, id)
	p.mu.Unlock()
}

// forwarder is one upgraded port-forward connection to a Pod.
type forwarder struct {
	conn httpstream.Connection
	mu   sync.Mutex
	next int // request id of the next stream pair
	// active counts the stream pairs open on conn; a retired forwarder
	// (no longer given to new dials) closes conn when the last one goes.
	active  int
	retired bool
	// failed is called when the kubelet reports an error for a stream
	// pair (the port was not listening, say): it retires the connection
	// (see dial), which may happen more than once.
	failed func()
}

// errStreamWait reports a stream pair that did not open within its wait.
var errStreamWait = errors.New("port-forward: no stream within the wait")

// reusedStreamWait bounds opening a stream pair on a port-forward
// connection that was open already: on a live one it takes a round trip.
const reusedStreamWait = time.Second

// forwarder returns the port-forward connection to Pod name, opening it
// when there is none (or the last one closed); fresh reports that it was
// opened by this call.
func (p *Provider) forwarder(ctx context.Context, name string) (f *forwarder, fresh bool, err error) {
	p.mu.Lock()
	f = p.fwd[name]
	p.mu.Unlock()
	if f != nil {
		select {
		case <-f.conn.CloseChan():
			p.dropForwarder(name)
		default:
			return f, false, nil
		}
	}
	rt, up, err := spdy.RoundTripperFor(p.rest)
	if err != nil {
		return nil, false, fmt.Errorf("port-forward transport: %w", err)
	}
	u := p.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.cfg.Namespace).Name(name).SubResource("portforward").URL()
	type result struct {
		conn httpstream.Connection
		err  error
	}
	done := make(chan result, 1)
	go func() {
		conn, proto, err := spdy.NewDialerForStreaming(up, &http.Client{Transport: rt}, http.MethodPost, u).Dial(portforward.PortForwardProtocolV1Name)
		if err == nil && proto != portforward.PortForwardProtocolV1Name {
			conn.Close()
			err = fmt.Errorf("port-forward: the server chose protocol %q", proto)
		}
		done <- result{conn, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		go func() {
			if r := <-done; r.conn != nil {
				r.conn.Close()
			}
		}()
		return nil, false, ctx.Err()
	}
	if r.err != nil {
		return nil, false, fmt.Errorf("port-forward to pod %s: %w", name, r.err)
	}
	f = &forwarder{conn: r.conn}
	f.failed = func() { p.retireForwarder(name, f) }
	p.mu.Lock()
	if old := p.fwd[name]; old != nil {
		p.mu.Unlock()
		f.close()
		return old, false, nil
	}
	p.fwd[name] = f
	p.mu.Unlock()
	return f, true, nil
}

// dropForwarder closes and forgets the port-forward connection to Pod
// name, if any.
func (p *Provider) dropForwarder(name string) {
	p.mu.Lock()
	f := p.fwd[name]
	delete(p.fwd, name)
	p.mu.Unlock()
	if f != nil {
		f.close()
	}
}

func (f *forwarder) close() { _ = f.conn.Close() }

// retireForwarder stops giving f, the connection to Pod name, to new
// dials; f closes once the streams it carries are closed.
func (p *Provider) retireForwarder(name string, f *forwarder) {
	p.mu.Lock()
	if p.fwd[name] == f {
		delete(p.fwd, name)
	}
	p.mu.Unlock()
	f.mu.Lock()
	f.retired = true
	idle := f.active == 0
	f.mu.Unlock()
	if idle {
		f.close()
	}
}

// release counts a stream pair closed, closing a retired forwarder's
// connection with its last one.
func (f *forwarder) release() {
	f.mu.Lock()
	f.active--
	done := f.retired && f.active == 0
	f.mu.Unlock()
	if done {
		f.close()
	}
}

// dialWithin is dial bounded by wait (0: unbounded); a stream pair that
// comes later is closed.
func (f *forwarder) dialWithin(port int, wait time.Duration) (net.Conn, error) {
	if wait <= 0 {
		return f.dial(port)
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := f.dial(port)
		done <- result{c, err}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r := <-done:
		return r.c, r.err
	case <-t.C:
		go func() {
			if r := <-done; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, fmt.Errorf("%w (%s)", errStreamWait, wait)
	}
}

// dial opens a stream pair (error and data) to port, as kubectl
// port-forward does for each accepted connection.
func (f *forwarder) dial(port int) (net.Conn, error) {
	f.mu.Lock()
	id := f.next
	f.next++
	f.mu.Unlock()
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.Itoa(id))
	errStream, err := f.conn.CreateStream(h)
	if err != nil {
		return nil, fmt.Errorf("port-forward error stream: %w", err)
	}
	errStream.Close() // nothing is written to it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := f.conn.CreateStream(h)
	if err != nil {
		f.conn.RemoveStreams(errStream)
		return nil, fmt.Errorf("port-forward data stream: %w", err)
	}
	f.mu.Lock()
	f.active++
	f.mu.Unlock()
	c := &streamConn{f: f, data: data, errStream: errStream, remoteErr: make(chan error, 1)}
	go func() {
		msg, err := io.ReadAll(errStream)
		switch {
		case err != nil:
			c.remoteErr <- err
		case len(msg) > 0:
			c.remoteErr <- fmt.Errorf("port-forward: %s", msg)
			// The far end gave the pair up (the port refused it) and
			// reads no more of its data stream, while what this end had
			// sent already sits in one of the far end's frame workers,
			// which then stops serving every stream it shares with it:
			// a later pair on this connection whose streams that worker
			// serves waits for its reply (for as long as it is let).
			// New dials get a fresh connection instead.
			if f.failed != nil {
				f.failed()
			}
		}
		close(c.remoteErr)
	}()
	return c, nil
}

// streamConn is a port-forward data stream as a net.Conn. Deadlines are
// not supported by the streams: they are accepted and ignored, which
// HTTP clients tolerate (they cancel by closing).
type streamConn struct {
	f         *forwarder
	data      httpstream.Stream
	errStream httpstream.Stream
	remoteErr chan error
	once      sync.Once
}

// Read reads the data stream; at its end, an error the kubelet wrote on
// the error stream (it closes both then) is returned instead of io.EOF.
func (c *streamConn) Read(b []byte) (int, error) {
	n, err := c.data.Read(b)
	if err == io.EOF {
		t := time.NewTimer(remoteErrWait)
		defer t.Stop()
		select {
		case rerr, ok := <-c.remoteErr:
			if ok && rerr != nil {
				return n, rerr
			}
		case <-t.C:
		}
	}
	return n, err
}

// remoteErrWait bounds how long Read waits, at the data stream's end, for
// the error stream's.
const remoteErrWait = time.Second

func (c *streamConn) Write(b []byte) (int, error) { return c.data.Write(b) }

// Close resets both streams, so the kubelet closes its side at once.
func (c *streamConn) Close() error {
	c.once.Do(func() {
		_ = c.data.Reset()
		_ = c.errStream.Reset()
		c.f.conn.RemoveStreams(c.data, c.errStream)
		c.f.release()
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr  { return pfAddr("local") }
func (c *streamConn) RemoteAddr() net.Addr { return pfAddr(strconv.Itoa(wire.DefaultPort)) }

func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

// pfAddr names an end of a port-forward stream.
type pfAddr string

func (a pfAddr) Network() string { return "portforward" }
func (a pfAddr) String() string  { return string(a) }
