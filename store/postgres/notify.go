package postgres

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NotifyChannel is the PostgreSQL notification channel on which every
// Notifier of a database announces and hears stream wake-ups.
const NotifyChannel = "astrabox_streams"

// Payload format on NotifyChannel: "<origin>/<key>". origin identifies the
// Notifier that sent it (random hex, so free of '/'), empty when unknown;
// a Notifier skips its own, having woken its subscribers already. key is
// "=" and the stream name when the name is short printable ASCII (valid in
// any server encoding, well under the 8000-byte payload limit), otherwise
// "#" and the hex SHA-256 of the name. Subscriptions are indexed by key, so
// a hashed name needs no mapping back.
const (
	maxLiteralStream = 512
	literalPrefix    = "="
	hashedPrefix     = "#"
)

// Timings of the listening connection and the sender.
const (
	notifyMinBackoff     = 100 * time.Millisecond // first reconnect delay
	notifyMaxBackoff     = 5 * time.Second        // reconnect delay cap
	notifyStableAfter    = 30 * time.Second       // a connection this old resets the backoff
	notifyHealthInterval = 30 * time.Second       // idle time after which the listener pings
	notifyOpTimeout      = 10 * time.Second       // connect+LISTEN, ping, send, close
)

// streamKey is the key under which stream is subscribed and announced.
func streamKey(stream string) string {
	if len(stream) <= maxLiteralStream {
		literal := true
		for i := 0; i < len(stream); i++ {
			if c := stream[i]; c < 0x20 || c > 0x7e {
				literal = false
				break
			}
		}
		if literal {
			return literalPrefix + stream
		}
	}
	sum := sha256.Sum256([]byte(stream))
	return hashedPrefix + hex.EncodeToString(sum[:])
}

// parsePayload splits a NotifyChannel payload into its origin and key; ok
// is false when the payload is not in this format.
func parsePayload(p string) (origin, key string, ok bool) {
	origin, key, ok = strings.Cut(p, "/")
	if !ok || (!strings.HasPrefix(key, literalPrefix) && !strings.HasPrefix(key, hashedPrefix)) {
		return "", "", false
	}
	return origin, key, true
}

// Notifier wakes followers of log streams across every replica sharing
// the database; it has the method set of store/streamlog's Notifier.
// Wake-ups carry no data and may be merged or lost (notifications sent
// while the listening connection is down never arrive), so a woken
// follower re-reads the store and still polls as the safety net.
//
// One dedicated connection LISTENs on NotifyChannel and wakes the
// in-process subscribers of each announced stream; after it has been lost
// and re-established (reconnecting with capped, jittered exponential
// backoff) every subscriber is woken once, for what was missed meanwhile.
// Notify wakes this process's subscribers at once and announces the stream
// to the other replicas through the Store's pool, from a background sender
// that merges bursts.
//
// A Notifier is safe for concurrent use. Close it before the Store it was
// made from.
type Notifier struct {
	pool    *pgxpool.Pool
	connCfg *pgx.ConnConfig
	log     *slog.Logger
	origin  string // this Notifier's payload origin

	mu      sync.Mutex
	subs    map[string]map[chan struct{}]struct{} // by streamKey
	pending map[string]struct{}                   // keys awaiting announcement
	closed  bool

	kick      chan struct{} // buffer 1: pending is non-empty
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Notifier connects a listening connection to s's database with s's
// connection settings and returns a running Notifier that announces
// through s's pool; log receives its reports (nil means slog.Default()).
// ctx governs the first connection only: a later loss is repaired in the
// background until Close. An error means nothing is left running.
func (s *Store) Notifier(ctx context.Context, log *slog.Logger) (*Notifier, error) {
	if log == nil {
		log = slog.Default()
	}
	cfg := s.pool.Config().ConnConfig.Copy()
	// On a cancelled or expired context, interrupt a wait with a read
	// deadline and leave the connection usable, which the idle health
	// check relies on (this is pgconn's default; set here so it stays so).
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	var id [8]byte
	if _, err := crand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("start stream notifier: %w", err)
	}
	n := &Notifier{
		pool:    s.pool,
		connCfg: cfg,
		log:     log,
		origin:  hex.EncodeToString(id[:]),
		subs:    map[string]map[chan struct{}]struct{}{},
		pending: map[string]struct{}{},
		kick:    make(chan struct{}, 1),
	}
	conn, err := n.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("start stream notifier: %w", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	n.stop = stop
	n.wg.Add(2)
	go n.listen(runCtx, conn)
	go n.send(runCtx)
	return n, nil
}

// Notify wakes the subscribers of stream in this process at once and
// queues the stream's announcement to the other replicas. It does not
// block on the database; a failed announcement is logged, not returned
// (followers elsewhere fall back on their poll). After Close it wakes this
// process's subscribers only.
func (n *Notifier) Notify(stream string) {
	key := streamKey(stream)
	n.mu.Lock()
	n.wakeLocked(key)
	queued := !n.closed
	if queued {
		n.pending[key] = struct{}{}
	}
	n.mu.Unlock()
	if queued {
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
}

// Subscribe returns a channel that receives a value after each Notify of
// stream on any replica, and after a reconnection of the listener
// (coalesced: at most one pending, never closed), and a cancel func,
// idempotent, that must be called to release it.
func (n *Notifier) Subscribe(stream string) (<-chan struct{}, func()) {
	key := streamKey(stream)
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs[key] == nil {
		n.subs[key] = map[chan struct{}]struct{}{}
	}
	n.subs[key][ch] = struct{}{}
	n.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			delete(n.subs[key], ch)
			if len(n.subs[key]) == 0 {
				delete(n.subs, key)
			}
		})
	}
}

// Close stops listening and announcing, sending what Notify queued before
// (best effort, bounded by a timeout), and returns once the background
// goroutines have ended and the listening connection is closed. Existing
// subscriptions stay valid but hear only this process's Notify calls.
// Later calls do nothing; Close always returns nil.
func (n *Notifier) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		n.stop()
		n.wg.Wait()
	})
	return nil
}

// wakeLocked wakes key's subscribers without blocking; n.mu is held.
func (n *Notifier) wakeLocked(key string) {
	for ch := range n.subs[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// wakeAll wakes every subscriber once.
func (n *Notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key := range n.subs {
		n.wakeLocked(key)
	}
}

// dispatch wakes the subscribers a received payload names, unless this
// Notifier sent it.
func (n *Notifier) dispatch(payload string) {
	origin, key, ok := parsePayload(payload)
	if !ok {
		n.log.Debug("stream notifier: ignoring foreign payload", "channel", NotifyChannel, "payload_bytes", len(payload))
		return
	}
	if origin == n.origin {
		return
	}
	n.mu.Lock()
	n.wakeLocked(key)
	n.mu.Unlock()
}

// connect opens a listening connection, within notifyOpTimeout.
func (n *Notifier) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, notifyOpTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, n.connCfg)
	if err != nil {
		return nil, fmt.Errorf("connect listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{NotifyChannel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("listen on %s: %w", NotifyChannel, err)
	}
	return conn, nil
}

// closeConn closes conn, within notifyOpTimeout.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), notifyOpTimeout)
	defer cancel()
	conn.Close(ctx)
}

// listen runs the listening connection until ctx ends: it serves conn,
// and when conn fails replaces it and wakes every subscriber.
func (n *Notifier) listen(ctx context.Context, conn *pgx.Conn) {
	defer n.wg.Done()
	backoff := notifyMinBackoff
	for {
		since := time.Now()
		err := n.serve(ctx, conn)
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		if time.Since(since) >= notifyStableAfter {
			backoff = notifyMinBackoff
		}
		n.log.Warn("stream notifier: listening connection lost", "channel", NotifyChannel, "error", err)
		for attempt := 1; ; attempt++ {
			// Wait between half and all of backoff, so that replicas that
			// lost the server together do not come back in step.
			wait := backoff/2 + rand.N(backoff/2+1)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, notifyMaxBackoff)
			conn, err = n.connect(ctx)
			if err == nil {
				n.log.Info("stream notifier: listening again", "channel", NotifyChannel, "attempts", attempt)
				break
			}
			if ctx.Err() != nil {
				return
			}
			n.log.Warn("stream notifier: reconnect failed", "channel", NotifyChannel, "attempt", attempt,
				"retry_in", backoff, "error", err)
		}
		// Anything announced while no connection listened is lost: let
		// every follower re-read.
		n.wakeAll()
	}
}

// serve dispatches conn's notifications until conn fails (it returns the
// error) or ctx ends (it returns ctx.Err()). After notifyHealthInterval
// without a notification it pings, so a connection the network silently
// dropped is noticed.
func (n *Notifier) serve(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, notifyHealthInterval)
		msg, err := conn.WaitForNotification(wctx)
		cancel()
		if msg != nil {
			n.dispatch(msg.Payload)
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
			return fmt.Errorf("wait for notification: %w", err)
		}
		pctx, cancel := context.WithTimeout(ctx, notifyOpTimeout)
		err = conn.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("ping listener: %w", err)
		}
	}
}

// send announces queued streams until ctx ends, then announces what is
// left.
func (n *Notifier) send(ctx context.Context) {
	defer n.wg.Done()
	for {
		select {
		case <-n.kick:
			n.flush()
		case <-ctx.Done():
			n.flush()
			return
		}
	}
}

// flush announces the pending streams in one statement, within
// notifyOpTimeout (not cut short by Close, which waits for it); a failure
// is logged and the streams are dropped.
func (n *Notifier) flush() {
	n.mu.Lock()
	pending := n.pending
	n.pending = map[string]struct{}{}
	n.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	payloads := make([]string, 0, len(pending))
	for key := range pending {
		payloads = append(payloads, n.origin+"/"+key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), notifyOpTimeout)
	defer cancel()
	if _, err := n.pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`,
		NotifyChannel, payloads); err != nil {
		n.log.Warn("stream notifier: announce failed", "channel", NotifyChannel, "streams", len(payloads), "error", err)
	}
}
