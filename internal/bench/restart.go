package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// RestartConfig configures the restart bench (`astrabox bench restart`).
// Zero fields take the defaults named.
type RestartConfig struct {
	// Binary is the astrabox binary: the server runs its `serve`, the
	// boxes its execd and agent.
	Binary string
	// Dir is a scratch directory (the server's data dir); the caller
	// removes it.
	Dir string
	// Kills is the number of kill -9 restarts measured (default 5).
	Kills int
	// Streaming are the numbers of replies streaming at a graceful stop
	// (default 0, 1 and 50), each measured Stops times (default 3).
	Streaming []int
	Stops     int
	// Progress receives a line per step.
	Progress io.Writer
}

func (c RestartConfig) withDefaults() RestartConfig {
	if c.Kills <= 0 {
		c.Kills = 5
	}
	if len(c.Streaming) == 0 {
		c.Streaming = []int{0, 1, 50}
	}
	if c.Stops <= 0 {
		c.Stops = 3
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// restartShape is a reply that streams for 3 s: 600 deltas 5 ms apart.
var restartShape = replyShape{Deltas: 600, Gap: 5 * time.Millisecond}

// RunRestart measures what a server's stop costs a reply in progress, in
// one run: a real `astrabox serve` (cfg.Binary) with the native backend on
// SQLite, Agents of the built-in agent on the bench model, replies of 3 s.
// Rows: kill -9 of the server mid-reply and a restart at once, to the
// reply's first new entry and to its text streaming again (the agent makes
// the broken model call again once the model path is back); and a
// graceful stop (SIGTERM) to the process's exit with 0, 1 and 50 replies
// streaming (they finish first). Needs root (the native backend).
// Everything it started is stopped and removed, also after a failure,
// when what was measured is returned with the error.
func RunRestart(ctx context.Context, cfg RestartConfig) (PlatformReport, error) {
	cfg = cfg.withDefaults()
	rep := PlatformReport{Title: "astrabox bench restart", Date: time.Now(), Machine: machine(),
		Settings: fmt.Sprintf("1 server, native, SQLite, replies of %d deltas %v apart, %d kills, stops with %v replies streaming ×%d",
			restartShape.Deltas, restartShape.Gap, cfg.Kills, cfg.Streaming, cfg.Stops)}
	if cfg.Binary == "" || cfg.Dir == "" {
		return rep, errors.New("bench: the restart bench needs the astrabox binary and a scratch directory")
	}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }
	model, err := startModel(benchModelKey)
	if err != nil {
		return rep, err
	}
	defer model.close()
	reps, err := newReplicas(cfg.Binary, cfg.Dir, "", 1, 2) // one server, its own SQLite database
	if err != nil {
		return rep, err
	}
	defer stopAll(reps)
	p := reps[0]
	progress("starting astrabox serve (native, SQLite)")
	if err := p.start(ctx); err != nil {
		return rep, err
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	env := &platformEnv{backend: "native", url: p.url(), hc: &http.Client{Transport: tr}, model: model}
	agent, err := setupAgent(ctx, env, model)
	if err != nil {
		return rep, err
	}
	model.setShape(restartShape)
	defer model.setShape(defaultShape)
	r := &restartRun{p: p, env: env, agent: agent, progress: progress}

	progress("kill -9 mid-reply and a restart, %d times", cfg.Kills)
	rows, err := r.measureKills(ctx, cfg.Kills)
	rep.Rows = append(rep.Rows, rows...)
	if err != nil {
		return rep, err
	}
	most := 0
	for _, n := range cfg.Streaming {
		most = max(most, n)
	}
	progress("opening %d Sessions for the graceful stops", most)
	sids, err := r.sessions(ctx, most)
	defer func() {
		for _, sid := range sids {
			_ = env.deleteSession(context.WithoutCancel(ctx), sid)
		}
	}()
	if err != nil {
		return rep, err
	}
	for _, n := range cfg.Streaming {
		progress("graceful stop with %d replies streaming, %d times", n, cfg.Stops)
		row, err := r.measureStops(ctx, sids[:n], cfg.Stops)
		if err != nil {
			return rep, err
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// restartRun is the restart bench's server and client.
type restartRun struct {
	p        *replicaProc
	env      *platformEnv
	agent    string
	progress func(string, ...any)
}

// sessions opens n Sessions and waits until each is READY.
func (r *restartRun) sessions(ctx context.Context, n int) ([]string, error) {
	var sids []string
	for range n {
		sid, err := r.env.newSession(ctx, r.agent)
		if err != nil {
			return sids, err
		}
		sids = append(sids, sid)
	}
	for _, sid := range sids {
		if err := r.env.waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
			return sids, err
		}
	}
	return sids, nil
}

// measureKills kills the server (-9) k times while a reply streams, and
// starts it again at once. Rows: the kill → the reply's first entry
// written after it, and → its next text-delta (the answer streaming
// again), as a follower on the restarted server receives them.
func (r *restartRun) measureKills(ctx context.Context, k int) ([]PlatformRow, error) {
	sids, err := r.sessions(ctx, 1)
	if len(sids) > 0 {
		defer r.env.deleteSession(context.WithoutCancel(ctx), sids[0])
	}
	if err != nil {
		return nil, err
	}
	sid := sids[0]
	var toEntry, toText []time.Duration
	var firsts []string
	for i := range k {
		s, err := r.env.sessionInfo(ctx, sid)
		if err != nil {
			return nil, err
		}
		f, err := follow(ctx, r.env, sid, s.LastSeq)
		if err != nil {
			return nil, err
		}
		in, err := r.env.sendInput(ctx, sid, fmt.Sprintf("kill %d", i))
		if err != nil {
			f.cancel()
			return nil, err
		}
		deltas := 0
		if _, err := f.until(replyTimeout, "the reply's 50th text-delta", func(fr followed) bool {
			if fr.Type == "text-delta" && fr.InputID == in {
				deltas++
			}
			return deltas == 50
		}); err != nil {
			f.cancel()
			return nil, err
		}
		f.cancel()
		s, err = r.env.sessionInfo(ctx, sid)
		if err != nil {
			return nil, err
		}
		r.p.kill9()
		killed := time.Now()
		if err := r.p.start(ctx); err != nil {
			return nil, err
		}
		f, err = follow(ctx, r.env, sid, s.LastSeq)
		if err != nil {
			return nil, err
		}
		first, err := f.until(replyTimeout, "the reply's first entry after the kill", func(followed) bool { return true })
		if err != nil {
			f.cancel()
			return nil, err
		}
		text := first
		if first.Type != "text-delta" {
			text, err = f.until(replyTimeout, "the reply's text streaming again", func(fr followed) bool { return fr.Type == "text-delta" && fr.InputID == in })
			if err != nil {
				f.cancel()
				return nil, err
			}
		}
		toEntry, toText = append(toEntry, first.At.Sub(killed)), append(toText, text.At.Sub(killed))
		firsts = append(firsts, first.Type)
		if _, err := f.until(replyTimeout, "the reply's end", func(fr followed) bool { return fr.Type == "turn.ended" && fr.InputID == in }); err != nil {
			f.cancel()
			return nil, err
		}
		f.cancel()
		if err := r.env.waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
			return nil, err
		}
	}
	note := "the restart included (the server answers /healthz within it); first entries after the kill: " + strings.Join(firsts, ", ")
	return []PlatformRow{
		{Scenario: "kill -9 mid-reply, restart at once → the reply's next entry", Backend: "native", Subject: seriesOf("kill → next entry", toEntry), Note: note},
		{Scenario: "kill -9 mid-reply, restart at once → its text streams again", Backend: "native", Subject: seriesOf("kill → next text-delta", toText),
			Note: "the agent makes the broken model call again after a pause of 1 s once the model path is back"},
	}, nil
}

// measureStops stops the server gracefully (SIGTERM) `times` times while
// the Sessions sids each stream a reply, timing the signal → the
// process's exit, and starts it again. Every reply must end completed.
func (r *restartRun) measureStops(ctx context.Context, sids []string, times int) (PlatformRow, error) {
	var ds []time.Duration
	for i := range times {
		var fs []*follower
		ins := make([]string, len(sids))
		cancelAll := func() {
			for _, f := range fs {
				f.cancel()
			}
		}
		for j, sid := range sids {
			s, err := r.env.sessionInfo(ctx, sid)
			if err != nil {
				cancelAll()
				return PlatformRow{}, err
			}
			f, err := follow(ctx, r.env, sid, s.LastSeq)
			if err != nil {
				cancelAll()
				return PlatformRow{}, err
			}
			fs = append(fs, f)
			if ins[j], err = r.env.sendInput(ctx, sid, fmt.Sprintf("stop %d", i)); err != nil {
				cancelAll()
				return PlatformRow{}, err
			}
		}
		for j, f := range fs {
			if _, err := f.until(replyTimeout, "the reply's first text-delta", func(fr followed) bool { return fr.Type == "text-delta" && fr.InputID == ins[j] }); err != nil {
				cancelAll()
				return PlatformRow{}, err
			}
		}
		cancelAll()
		t0 := time.Now()
		_ = r.p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.p.exited:
		case <-time.After(time.Minute):
			return PlatformRow{}, errors.New("bench: the server did not stop within a minute of SIGTERM")
		}
		ds = append(ds, time.Since(t0))
		if err := r.p.start(ctx); err != nil {
			return PlatformRow{}, err
		}
		for j, sid := range sids {
			f, err := follow(ctx, r.env, sid, 0)
			if err != nil {
				return PlatformRow{}, err
			}
			end, err := f.until(replyTimeout, "the reply's end", func(fr followed) bool { return fr.Type == "turn.ended" && fr.InputID == ins[j] })
			f.cancel()
			if err != nil {
				return PlatformRow{}, err
			}
			if !strings.Contains(end.Data, `"completed"`) {
				return PlatformRow{}, fmt.Errorf("bench: a reply across a graceful stop ended %s", end.Data)
			}
			if err := r.env.waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
				return PlatformRow{}, err
			}
		}
	}
	return PlatformRow{Scenario: fmt.Sprintf("graceful stop (SIGTERM → exit), %d replies streaming", len(sids)), Backend: "native",
		Subject: seriesOf("SIGTERM → exit", ds),
		Note:    "replies in progress finish first (each had up to 3 s left), then their Sessions are handed over; every reply completed"}, nil
}
