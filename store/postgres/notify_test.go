package postgres_test

import (
	"context"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/store/postgres"
	"github.com/astrabox/astrabox/store/streamlog"
	"github.com/astrabox/astrabox/store/streamlog/notifiertest"
)

// Notifier has the method set of store/streamlog's Notifier (spelled out
// here: the store does not depend on the platform).
var _ interface {
	Notify(stream string)
	Subscribe(stream string) (<-chan struct{}, func())
} = (*postgres.Notifier)(nil)

// notifyDeadline bounds every wait for something the tests expect to
// happen; it is a failure bound, not a latency requirement.
const notifyDeadline = 30 * time.Second

// withAppName returns dsn with application_name set to name, so that the
// test can find the backends of one replica in pg_stat_activity.
func withAppName(t *testing.T, dsn, name string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("parse dsn: %v", err)
		}
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + name
}

// replica opens a Store on dsn under application_name name and starts its
// Notifier; both are closed when t ends, the Notifier first.
func replica(t *testing.T, dsn, name string) (*postgres.Store, *postgres.Notifier) {
	t.Helper()
	s, err := postgres.Open(t.Context(), withAppName(t, dsn, name))
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { s.Close() })
	n, err := s.Notifier(t.Context(), slog.New(slog.NewTextHandler(t.Output(), nil)).With("replica", name))
	if err != nil {
		t.Fatalf("notifier %s: %v", name, err)
	}
	t.Cleanup(func() { n.Close() })
	return s, n
}

// awaitWake fails t unless ch receives within notifyDeadline.
func awaitWake(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(notifyDeadline):
		t.Fatalf("%s: not woken", what)
	}
}

// pending reports whether ch holds a wake-up, consuming it.
func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// listenerPIDs returns the backend pids of the listening connections of
// the replica named app on dsn's database.
func listenerPIDs(t *testing.T, conn *pgx.Conn, app string) []uint32 {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1 AND query LIKE 'LISTEN %'`, app)
	if err != nil {
		t.Fatalf("query listeners: %v", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		t.Fatalf("query listeners: %v", err)
	}
	return pids
}

// connect opens a plain connection to dsn, closed when t ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestNotifierConformance runs the notifier suite on two replicas of one
// fresh database (a new database for each test of the suite).
func TestNotifierConformance(t *testing.T) {
	notifiertest.Run(t, func(t *testing.T) (streamlog.Notifier, streamlog.Notifier) {
		dsn := freshDatabase(t)
		_, a := replica(t, dsn, "replica_a")
		_, b := replica(t, dsn, "replica_b")
		return a, b
	})
}

// TestNotifierCoalesces: wake-ups are merged into at most one pending, and
// a replica does not wake its subscribers again on hearing its own
// announcement.
func TestNotifierCoalesces(t *testing.T) {
	dsn := freshDatabase(t)
	_, a := replica(t, dsn, "replica_a")
	_, b := replica(t, dsn, "replica_b")
	onA, cancelA := a.Subscribe("s")
	defer cancelA()
	onB, cancelB := b.Subscribe("s")
	defer cancelB()
	other, cancelOther := b.Subscribe("other")
	defer cancelOther()
	markA, cancelMark := a.Subscribe("marker")
	defer cancelMark()

	for range 3 {
		a.Notify("s")
	}
	if !pending(onA) {
		t.Fatal("not woken by local notifies")
	}
	if pending(onA) {
		t.Fatal("three notifies left more than one wake-up pending")
	}
	awaitWake(t, onB, "a to b")

	// b heard a's announcement, so a's listener receives it before the
	// marker b sends now: once the marker arrives, a's echo would have.
	b.Notify("marker")
	awaitWake(t, markA, "marker")
	if pending(onA) {
		t.Error("a woke its subscriber again on hearing its own announcement")
	}
	if pending(other) {
		t.Error("a subscriber of another stream was woken")
	}
}

// TestNotifierReconnect: when the listening connection is killed the
// Notifier reconnects, wakes every subscriber (announcements may have been
// lost meanwhile) and hears announcements again.
func TestNotifierReconnect(t *testing.T) {
	dsn := freshDatabase(t)
	_, a := replica(t, dsn, "replica_a")
	_, b := replica(t, dsn, "replica_b")
	admin := connect(t, dsn)
	s1, cancel1 := a.Subscribe("s1")
	defer cancel1()
	s2, cancel2 := a.Subscribe("s2")
	defer cancel2()

	var old []uint32
	wait.Until(t, notifyDeadline, "a's listener visible", func() bool {
		old = listenerPIDs(t, admin, "replica_a")
		return len(old) == 1
	})
	var killed bool
	if err := admin.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, old[0]).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate listener %d: %v (terminated %v)", old[0], err, killed)
	}
	awaitWake(t, s1, "s1 after reconnect")
	awaitWake(t, s2, "s2 after reconnect")
	if pids := listenerPIDs(t, admin, "replica_a"); len(pids) != 1 || pids[0] == old[0] {
		t.Fatalf("listeners after reconnect: %v, want one other than %d", pids, old[0])
	}

	b.Notify("s1")
	awaitWake(t, s1, "b to a after reconnect")
	if pending(s2) {
		t.Error("s2 woken by a notify of s1")
	}
}

// TestNotifierClose: Close sends what was queued, ends the background
// goroutines and releases the listening connection; the Notifier then
// still wakes its own subscribers, and a second Close does nothing.
func TestNotifierClose(t *testing.T) {
	dsn := freshDatabase(t)
	s, err := postgres.Open(t.Context(), withAppName(t, dsn, "replica_a"))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	admin := connect(t, dsn)
	_, b := replica(t, dsn, "replica_b")
	onB, cancelB := b.Subscribe("s")
	defer cancelB()
	before := runtime.NumGoroutine()

	n, err := s.Notifier(t.Context(), slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatalf("notifier: %v", err)
	}
	ch, cancel := n.Subscribe("s")
	defer cancel()
	wait.Until(t, notifyDeadline, "listener visible", func() bool { return len(listenerPIDs(t, admin, "replica_a")) == 1 })
	n.Notify("s") // queued for the sender, which Close flushes
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	awaitWake(t, onB, "announcement queued before close")
	wait.Until(t, notifyDeadline, "goroutines ended", func() bool { return runtime.NumGoroutine() <= before })
	wait.Until(t, notifyDeadline, "listener released", func() bool { return len(listenerPIDs(t, admin, "replica_a")) == 0 })

	pending(ch)
	n.Notify("s")
	if !pending(ch) {
		t.Error("closed notifier did not wake its own subscriber")
	}
}
