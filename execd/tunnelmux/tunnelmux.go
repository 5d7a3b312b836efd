// Package tunnelmux is the multiplexing of execd's reverse tunnel (see
// wire.TunnelPath): a yamux session carried in the binary messages of a
// WebSocket, configured alike at both ends. execd's end opens one stream
// per connection made in the box; the client's end accepts them.
//
// It also keeps yamux's Close from spinning: yamux marks a session closed,
// then closes its connection, and only then closes the streams, and in
// between every stream blocked in Read or Write busy-loops, starving the
// goroutine that closes them (seconds with a few dozen streams). A Session
// therefore tracks the streams in use and, first thing when its connection
// is closed, wakes them for good; and it drops the WebSocket at once
// instead of waiting for a closing handshake there.
package tunnelmux

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"

	"github.com/astrabox/astrabox/execd/wire"
)

// Session is one end of a tunnel. Its methods are safe for concurrent use.
type Session struct {
	ys *yamux.Session

	mu    sync.Mutex
	live  map[*yamux.Stream]struct{}
	woken bool // set once the session ended; live streams were woken
}

// New starts the session of one end over ws: opener is execd's end, the
// yamux client, which opens the streams. The session lasts until Close,
// until ws fails or closes, until the peer stops answering keepalives, or
// until ctx ends. log receives yamux's own messages at debug level (nil
// drops them: every failure also surfaces as an error from a call).
func New(ctx context.Context, ws *websocket.Conn, opener bool, log *slog.Logger) (*Session, error) {
	s := &Session{live: make(map[*yamux.Stream]struct{})}
	conn := &wsConn{Conn: websocket.NetConn(ctx, ws, websocket.MessageBinary), ws: ws, closing: s.wakeAll}
	cfg := config(log)
	var err error
	if opener {
		s.ys, err = yamux.Client(conn, cfg)
	} else {
		s.ys, err = yamux.Server(conn, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("start tunnel session: %w", err)
	}
	return s, nil
}

// config is the yamux configuration of both ends.
func config(log *slog.Logger) *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.AcceptBacklog = wire.TunnelMaxConns
	cfg.EnableKeepAlive = true
	cfg.KeepAliveInterval = wire.TunnelKeepAlive
	cfg.ConnectionWriteTimeout = wire.TunnelWriteTimeout
	cfg.StreamCloseTimeout = wire.TunnelHalfCloseTimeout
	// A connection waits for its stream to be accepted as it would in a
	// listen backlog, instead of a slow Accept ending the whole session.
	cfg.StreamOpenTimeout = 0
	if log != nil {
		cfg.LogOutput, cfg.Logger = nil, yamuxLogger{log}
	} else {
		cfg.LogOutput = io.Discard
	}
	return cfg
}

// Open opens a stream (execd's end). The caller calls Release once it no
// longer reads or writes the stream.
func (s *Session) Open() (*yamux.Stream, error) {
	st, err := s.ys.OpenStream()
	if err != nil {
		return nil, err
	}
	s.track(st)
	return st, nil
}

// Accept waits for the next stream (the client's end). The caller calls
// Release once it no longer reads or writes the stream.
func (s *Session) Accept() (*yamux.Stream, error) {
	st, err := s.ys.AcceptStream()
	if err != nil {
		return nil, err
	}
	s.track(st)
	return st, nil
}

// Release forgets st, which is no longer read or written.
func (s *Session) Release(st *yamux.Stream) {
	s.mu.Lock()
	delete(s.live, st)
	s.mu.Unlock()
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.ys.CloseChan() }

// Ended reports whether the session has ended.
func (s *Session) Ended() bool { return s.ys.IsClosed() }

// Close ends the session: every stream ends, and the WebSocket is dropped
// without a closing handshake (do that first, if wanted). Idempotent.
func (s *Session) Close() error { return s.ys.Close() }

// track records st; one that comes after the end is woken at once.
func (s *Session) track(st *yamux.Stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.woken {
		_ = st.SetDeadline(time.Now())
		return
	}
	s.live[st] = struct{}{}
}

// wakeAll makes every pending and future Read and Write of the live
// streams fail with a timeout, so that none spins while yamux closes them.
func (s *Session) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.woken = true
	now := time.Now()
	for st := range s.live {
		_ = st.SetDeadline(now)
	}
}

// wsConn is the WebSocket as the session's connection. yamux calls Close
// on every way a session ends, right after marking it closed: closing
// wakes the streams before anything else happens.
type wsConn struct {
	net.Conn
	ws      *websocket.Conn
	closing func()
}

func (c *wsConn) Close() error {
	c.closing()
	return c.ws.CloseNow()
}

// yamuxLogger passes yamux's messages ("[ERR] yamux: ...") to slog.
type yamuxLogger struct{ log *slog.Logger }

func (l yamuxLogger) Print(v ...any) { l.emit(fmt.Sprint(v...)) }

func (l yamuxLogger) Printf(format string, v ...any) { l.emit(fmt.Sprintf(format, v...)) }

func (l yamuxLogger) Println(v ...any) { l.emit(fmt.Sprintln(v...)) }

func (l yamuxLogger) emit(msg string) {
	l.log.Debug("tunnel multiplexer", "detail", strings.TrimSpace(msg))
}
