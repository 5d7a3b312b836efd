package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/astrabox/astrabox/store/sqlite"
)

// PlatformConfig configures the agent platform bench (`astrabox bench
// platform`). Zero fields take the defaults named.
type PlatformConfig struct {
	// Backends are the sandbox backends measured, one server each, in
	// order: "process" (the test harness: no isolation, so the figures are
	// AstraBox's own overhead) and "native" (needs root).
	Backends []string
	// Binary is the astrabox binary the boxes run (the agent program is
	// its `astrabox agent`).
	Binary string
	// Dir is a scratch directory (stores, boxes); the caller removes it.
	Dir string
	// N is the number of samples of each first-token and resume latency
	// (default 20).
	N int
	// PoolSize is the warm pool of the cold-from-a-pool row (default 2).
	PoolSize int
	// Followers is how many clients follow one Session at once (default
	// 100); FollowRounds replies are measured (default max(1, N/10)),
	// each of FollowDeltas text deltas FollowGap apart (default 100, 5 ms).
	Followers    int
	FollowRounds int
	FollowDeltas int
	FollowGap    time.Duration
	// AppendFor is how long each append row appends (default 2 s).
	AppendFor time.Duration
	// Postgres is the DSN of a PostgreSQL server for the append rows; ""
	// leaves them out with a note.
	Postgres string
	// PiRootfs is the pi image's rootfs tarball (make
	// dist/pi-rootfs.tar.gz): with it, the native backend's rows include
	// pi's first token beside the built-in agent's; "" leaves them out
	// with a note.
	PiRootfs string
	// Progress receives a line per step.
	Progress io.Writer
	// Logger receives the in-process server's logs (default: none).
	Logger *slog.Logger
}

// withDefaults fills the zero fields of c.
func (c PlatformConfig) withDefaults() PlatformConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.N, 20)
	def(&c.PoolSize, 2)
	def(&c.Followers, 100)
	def(&c.FollowRounds, max(1, c.N/10))
	def(&c.FollowDeltas, 100)
	if c.FollowGap <= 0 {
		c.FollowGap = 5 * time.Millisecond
	}
	if c.AppendFor <= 0 {
		c.AppendFor = 2 * time.Second
	}
	if len(c.Backends) == 0 {
		c.Backends = []string{"process"}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = discardLogger()
	}
	return c
}

// RunPlatform measures the agent platform in one run, each figure side by
// side with its reference: on every backend, an in-process server (the
// internal/server wiring, SQLite, loopback HTTP) with the bench model on
// loopback, driven over HTTP as a client would, for time to first token
// (warm Session, cold from a warm pool, cold without one), many followers
// of one Session and resume; then log appends on SQLite and, when
// cfg.Postgres is set, PostgreSQL. Every loop is bounded in count and
// time. What was measured before a failure is returned with the error;
// boxes, Sessions and scratch databases are removed either way.
func RunPlatform(ctx context.Context, cfg PlatformConfig) (PlatformReport, error) {
	cfg = cfg.withDefaults()
	rep := PlatformReport{Date: time.Now(), Machine: machine(),
		Settings: fmt.Sprintf("n %d, pool %d, %d followers", cfg.N, cfg.PoolSize, cfg.Followers)}
	if cfg.Binary == "" || cfg.Dir == "" {
		return rep, errors.New("bench: the platform bench needs the astrabox binary and a scratch directory")
	}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }
	model, err := startModel(benchModelKey)
	if err != nil {
		return rep, err
	}
	defer model.close()
	switch {
	case cfg.PiRootfs == "":
		rep.Notes = append(rep.Notes, "pi rows left out: no pi image (--pi-rootfs or $ASTRABOX_TEST_PI_ROOTFS; make dist/pi-rootfs.tar.gz)")
	case !slices.Contains(cfg.Backends, "native"):
		rep.Notes = append(rep.Notes, "pi rows left out: they run on the native backend (--backends process,native)")
	}
	for _, backend := range cfg.Backends {
		backend = strings.TrimSpace(backend)
		rows, err := runBackend(ctx, cfg, backend, model, progress)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			return rep, fmt.Errorf("bench platform on %s: %w", backend, err)
		}
	}

	progress("log appends on SQLite, %s per row", cfg.AppendFor)
	sq, err := sqlite.Open(ctx, filepath.Join(cfg.Dir, "append.db"))
	if err != nil {
		return rep, err
	}
	rows, err := measureAppends(ctx, sq, "sqlite", cfg.AppendFor)
	_ = sq.Close()
	rep.Rows = append(rep.Rows, rows...)
	if err != nil {
		return rep, err
	}
	if cfg.Postgres == "" {
		rep.Notes = append(rep.Notes, "PostgreSQL rows left out: no DSN (--postgres or $ASTRABOX_TEST_POSTGRES)")
		return rep, nil
	}
	progress("log appends on PostgreSQL, %s per row", cfg.AppendFor)
	pg, cleanup, note, err := openBenchPostgres(ctx, cfg.Postgres)
	if err != nil {
		rep.Notes = append(rep.Notes, "PostgreSQL rows left out: "+err.Error())
		return rep, nil
	}
	defer cleanup()
	rep.Notes = append(rep.Notes, note)
	rows, err = measureAppends(ctx, pg, "postgres", cfg.AppendFor)
	rep.Rows = append(rep.Rows, rows...)
	return rep, err
}

// runBackend measures the Session scenarios on one backend's server.
func runBackend(ctx context.Context, cfg PlatformConfig, backend string, model *benchModel, progress func(string, ...any)) ([]PlatformRow, error) {
	progress("%s: starting the server", backend)
	env, err := startPlatform(ctx, cfg, backend, filepath.Join(cfg.Dir, backend), model)
	if err != nil {
		return nil, err
	}
	defer env.close()
	progress("%s: first token, %d samples each of a warm Session, a cold one from a pool, a cold one without", backend, cfg.N)
	rows, err := env.measureFirstToken(ctx, cfg.N, cfg.PoolSize)
	if err != nil {
		return rows, err
	}
	if env.piAgent != "" {
		progress("%s: pi's first token, %d samples each of a warm Session and a cold one", backend, cfg.N)
		pi, err := env.measurePi(ctx, cfg.N)
		rows = append(rows, pi...)
		if err != nil {
			return rows, fmt.Errorf("pi: %w", err)
		}
	}
	progress("%s: %d followers of one Session, %d replies", backend, cfg.Followers, cfg.FollowRounds)
	sid, err := env.newSession(ctx, env.coldAgent)
	if err != nil {
		return rows, err
	}
	defer env.deleteSession(context.WithoutCancel(ctx), sid)
	if err := env.waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
		return rows, err
	}
	if _, err := env.reply(ctx, sid, time.Time{}); err != nil {
		return rows, err
	}
	row, span, err := env.measureFollowers(ctx, sid, cfg.Followers, cfg.FollowRounds, cfg.FollowDeltas, cfg.FollowGap)
	if err != nil {
		return rows, err
	}
	rows = append(rows, row)
	progress("%s: resume, %d samples", backend, cfg.N)
	row, err = env.measureResume(ctx, sid, span, cfg.N)
	if err != nil {
		return rows, err
	}
	return append(rows, row), nil
}
