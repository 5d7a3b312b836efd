package server

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// HTTPLimits bound the server's connections and how long a client may
// take to send a request. Zero fields take the defaults below; a negative
// count or timeout turns that bound off.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers (default 10 s).
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds reading a request's body, except on the
	// sandbox proxy (uploads, WebSockets), whose streams are the
	// sandbox's (default 30 s; see api.Config.BodyReadTimeout).
	BodyReadTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no request
	// for this long (default 2 min).
	IdleTimeout time.Duration
	// MaxConnections bounds the connections open at once; beyond it the
	// server accepts no more until one closes (default 4096).
	MaxConnections int
	// MaxConnectionsPerIP bounds the connections open at once from one
	// client address; more are closed as soon as they are accepted
	// (default 256). Behind a reverse proxy every client has the proxy's
	// address: set it to -1 there and bound clients at the proxy.
	MaxConnectionsPerIP int
}

// The defaults of HTTPLimits.
const (
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultBodyReadTimeout     = 30 * time.Second
	DefaultIdleTimeout         = 2 * time.Minute
	DefaultMaxConnections      = 4096
	DefaultMaxConnectionsPerIP = 256
)

// withDefaults fills zero fields with the defaults and turns negative
// ones into 0 (no bound), as http.Server and the listener take them.
func (h HTTPLimits) withDefaults() HTTPLimits {
	dur := func(v, d time.Duration) time.Duration {
		switch {
		case v == 0:
			return d
		case v < 0:
			return 0
		}
		return v
	}
	count := func(v, d int) int {
		switch {
		case v == 0:
			return d
		case v < 0:
			return 0
		}
		return v
	}
	return HTTPLimits{
		ReadHeaderTimeout:   dur(h.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		BodyReadTimeout:     dur(h.BodyReadTimeout, DefaultBodyReadTimeout),
		IdleTimeout:         dur(h.IdleTimeout, DefaultIdleTimeout),
		MaxConnections:      count(h.MaxConnections, DefaultMaxConnections),
		MaxConnectionsPerIP: count(h.MaxConnectionsPerIP, DefaultMaxConnectionsPerIP),
	}
}

// LimitListener returns l bounded to total connections open at once
// (Accept waits for one to close; 0: no bound) and perIP from one client
// address (more are closed at once; 0: no bound). Accept errors other
// than l's closing are logged and retried after a pause that doubles from
// 5 ms up to 1 s, so that a burst of them (out of file descriptors) never
// stops the server. Closing the returned listener closes l.
func LimitListener(l net.Listener, total, perIP int, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.Default()
	}
	ll := &limitListener{Listener: l, perIP: perIP, byIP: map[string]int{}, log: log,
		minBackoff: 5 * time.Millisecond, maxBackoff: time.Second, done: make(chan struct{})}
	if total > 0 {
		ll.slots = make(chan struct{}, total)
	}
	return ll
}

type limitListener struct {
	net.Listener
	slots                  chan struct{} // one per open connection; nil: no bound
	perIP                  int
	log                    *slog.Logger
	minBackoff, maxBackoff time.Duration

	mu   sync.Mutex
	byIP map[string]int

	closeOnce sync.Once
	done      chan struct{}
}

// Accept returns the next connection within the bounds.
func (l *limitListener) Accept() (net.Conn, error) {
	backoff := time.Duration(0)
	for {
		if l.slots != nil {
			select {
			case l.slots <- struct{}{}:
			case <-l.done:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.release()
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			select {
			case <-l.done:
				return nil, net.ErrClosed
			default:
			}
			backoff = min(max(2*backoff, l.minBackoff), l.maxBackoff)
			l.log.Warn("accept failed; retrying", "err", err, "backoff_ms", backoff.Milliseconds())
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return nil, net.ErrClosed
			}
			continue
		}
		backoff = 0
		ip := clientIP(c.RemoteAddr())
		if !l.admit(ip) {
			c.Close()
			l.release()
			continue
		}
		return &limitConn{Conn: c, l: l, ip: ip}, nil
	}
}

// Close closes the listener; Accepts waiting for a slot return.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// admit counts a connection from ip, or refuses it when ip holds perIP.
func (l *limitListener) admit(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perIP > 0 && l.byIP[ip] >= l.perIP {
		return false
	}
	l.byIP[ip]++
	return true
}

// forget uncounts a closed connection from ip.
func (l *limitListener) forget(ip string) {
	l.mu.Lock()
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
	l.mu.Unlock()
	l.release()
}

func (l *limitListener) release() {
	if l.slots != nil {
		<-l.slots
	}
}

func clientIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitConn gives its listener's counts back once, on the first Close.
type limitConn struct {
	net.Conn
	l    *limitListener
	ip   string
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c.ip) })
	return err
}
