package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/astrabox/astrabox/store/postgres"
)

// ReplicasConfig configures the replicas bench (`astrabox bench replicas`).
// Zero fields take the defaults named.
type ReplicasConfig struct {
	// Binary is the astrabox binary: the replicas run its `serve`, the
	// boxes its execd and agent.
	Binary string
	// Dir is a scratch directory (the replicas' data dirs); the caller
	// removes it.
	Dir string
	// Postgres is the DSN of the PostgreSQL server the replicas share (a
	// scratch database is created on it and dropped afterwards).
	Postgres string
	// Takeovers is the number of kill -9 takeovers measured (default 5).
	Takeovers int
	// N is the number of samples of each notification latency (default 20).
	N int
	// Lease is the replicas' Session lease in whole seconds (default 2);
	// it is also their sweep interval, and so bounds a takeover.
	Lease int
	// Progress receives a line per step.
	Progress io.Writer
}

func (c ReplicasConfig) withDefaults() ReplicasConfig {
	if c.Takeovers <= 0 {
		c.Takeovers = 5
	}
	if c.N <= 0 {
		c.N = 20
	}
	if c.Lease <= 0 {
		c.Lease = 2
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// RunReplicas measures what several replicas on one PostgreSQL database
// cost a Session, in one run: two real `astrabox serve` processes (cfg.Binary)
// with the native backend on a scratch database, Agents on the bench
// model. Rows: the takeover after kill -9 of a Session's holder (to the
// next frame a follower on the other replica sees) against its bound, a
// lease and a sweep interval; an input accepted by one replica as seen by
// a follower on the other, beside a follower on the same replica; an input
// accepted by a replica that does not hold the Session until its holder
// starts the reply, beside an input to the holder itself; and, at the log
// layer on the same database, an append through one store seen by a
// follower of another, woken by LISTEN/NOTIFY beside the poll fallback
// alone (which `astrabox serve` offers no setting to select). Needs root
// (the native backend). Everything it started is stopped and removed, also
// after a failure, when what was measured is returned with the error.
func RunReplicas(ctx context.Context, cfg ReplicasConfig) (PlatformReport, error) {
	cfg = cfg.withDefaults()
	rep := PlatformReport{Title: "astrabox bench replicas", Date: time.Now(), Machine: machine(),
		Settings: fmt.Sprintf("2 replicas, native, lease %d s, %d takeovers, n %d", cfg.Lease, cfg.Takeovers, cfg.N)}
	if cfg.Binary == "" || cfg.Dir == "" || cfg.Postgres == "" {
		return rep, errors.New("bench: the replicas bench needs the astrabox binary, a scratch directory and a PostgreSQL DSN")
	}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }
	scratch, drop, err := postgres.CreateScratch(ctx, cfg.Postgres, "astrabox_bench_replicas_")
	if err != nil {
		return rep, fmt.Errorf("bench: scratch database: %w", err)
	}
	defer drop()
	rep.Notes = append(rep.Notes, "a scratch database on the DSN's server, dropped afterwards")

	progress("log layer: %d appends through one store seen by a follower of another, LISTEN/NOTIFY and poll only", cfg.N)
	row, err := measureLogWake(ctx, scratch, cfg.N)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, row)

	model, err := startModel(benchModelKey)
	if err != nil {
		return rep, err
	}
	defer model.close()
	reps, err := newReplicas(cfg.Binary, cfg.Dir, scratch, 2, cfg.Lease)
	if err != nil {
		return rep, err
	}
	defer stopAll(reps)
	progress("starting 2 replicas (astrabox serve, native, lease %d s)", cfg.Lease)
	for _, p := range reps {
		if err := p.start(ctx); err != nil {
			return rep, err
		}
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	envs := make([]*platformEnv, len(reps))
	for i, p := range reps {
		envs[i] = &platformEnv{backend: "native", url: p.url(), hc: &http.Client{Transport: tr}, model: model}
	}
	agent, err := setupAgent(ctx, envs[0], model)
	if err != nil {
		return rep, err
	}
	c := &cluster{reps: reps, envs: envs, model: model, agent: agent, lease: time.Duration(cfg.Lease) * time.Second}

	progress("notification across replicas: %d inputs each way", cfg.N)
	rows, err := c.measureWakes(ctx, cfg.N)
	rep.Rows = append(rep.Rows, rows...)
	if err != nil {
		return rep, err
	}
	progress("takeover: %d kill -9 of a Session's holder mid-reply", cfg.Takeovers)
	row, err = c.measureTakeovers(ctx, cfg.Takeovers)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, row)
	return rep, nil
}

// setupAgent stores a RuntimeProfile on the native backend with the bench
// model, and an Agent on it, through e; it returns the agent's id.
func setupAgent(ctx context.Context, e *platformEnv, model *benchModel) (string, error) {
	prof := map[string]any{"backend": "native", "engine_kinds": []string{"astrabox"},
		"model": map[string]any{"base_url": model.URL(), "api_key": benchModelKey, "models": []string{"bench-1"}}}
	if err := e.call(ctx, http.StatusOK, "PUT", "/api/v1/runtime-profiles/bench-replicas", prof, nil); err != nil {
		return "", err
	}
	var a struct {
		ID string `json:"agent_id"`
	}
	err := e.call(ctx, http.StatusCreated, "POST", "/api/v1/agents", map[string]any{"name": "bench-replicas", "engine_kind": "astrabox",
		"runtime_profile": "bench-replicas", "model": "bench-1", "permission_mode": "auto", "instructions": "Be brief."}, &a)
	return a.ID, err
}
