package wire

import "time"

// The reverse tunnel (addition) lets a box that cannot dial out reach a
// service of whoever can reach execd:
//
//	GET /tunnel?listen=127.0.0.1:8080   (a WebSocket upgrade)
//
// execd listens on `listen`, a loopback IP address and a port from 1 to
// 65535 inside the box, and carries a yamux session (github.com/hashicorp/yamux,
// protocol version 0) in the binary messages of the WebSocket. execd is the
// yamux client: for every connection accepted on the in-box listener it
// opens one stream, and relays bytes both ways, passing a half-close on as
// a half-close. The WebSocket's client is the yamux server: it accepts the
// streams and serves them, the way a listener's owner serves connections.
//
// Before the upgrade, errors are JSON answers: MISSING_QUERY (400) without
// `listen`; INVALID_REQUEST_BODY (400) for an address that is not a
// loopback IP with a non-zero port; CONFLICT (409) when the address is
// already tunnelled or something in the box listens on it.
//
// The tunnel lasts as long as the WebSocket: when it ends, execd closes
// the listener and resets every connection it accepted, and the address is
// free for a new tunnel (a new request right after the old WebSocket
// closed can still meet CONFLICT briefly, while execd tears the old one
// down).
const (
	// TunnelPath is the route of the tunnel.
	TunnelPath = "/tunnel"
	// TunnelListenParam is the query parameter with the in-box address.
	TunnelListenParam = "listen"
)

// Parameters both ends of a tunnel configure their yamux session with.
const (
	// TunnelMaxConns bounds the connections execd relays at once for one
	// tunnel; more wait in the listener's backlog. It is also the yamux
	// accept backlog of both ends, so that every stream execd opens fits in
	// the backlog of the side that accepts them.
	TunnelMaxConns = 256
	// TunnelKeepAlive is how often each end pings the other.
	TunnelKeepAlive = 15 * time.Second
	// TunnelWriteTimeout bounds one write on the session and the wait for
	// a ping's answer: an end that is stuck for longer ends the tunnel.
	TunnelWriteTimeout = 30 * time.Second
	// TunnelHalfCloseTimeout is how long a stream stays half-closed (one
	// direction finished, the other not) before it is reset.
	TunnelHalfCloseTimeout = 5 * time.Minute
)

// TunnelReplaceParam ("true") makes a tunnel request end a live tunnel on
// the same address and take its place, instead of being refused: a new
// holder of a Session takes over from one that is gone or frozen.
const TunnelReplaceParam = "replace"
