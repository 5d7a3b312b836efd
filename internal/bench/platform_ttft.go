package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// errNoPool reports a warm pool that did not fill in time.
var errNoPool = errors.New("warm pool did not fill")

// poolFillTimeout bounds the wait for the warm pool before a sample.
const poolFillTimeout = 2 * time.Minute

// runtimeTimeout bounds the wait for a Session's runtime to come up.
const runtimeTimeout = 2 * time.Minute

// measureFirstToken measures time to first token through AstraBox (client
// side, on the ai-stream) against the bench model read directly, n
// samples of each, interleaved: for a warm Session (its runtime up and a
// reply already given), a cold Session from the warm pool and a cold
// Session without a pool. A cold sample's clock starts before POST
// conversations (the runtime starts building on creation) and covers
// opening the stream and posting the input; its Session is deleted
// afterwards.
func (e *platformEnv) measureFirstToken(ctx context.Context, n, poolSize int) ([]PlatformRow, error) {
	var rows []PlatformRow
	row, err := e.warmFirstToken(ctx, n, e.coldAgent)
	if err != nil {
		return nil, fmt.Errorf("warm Session: %w", err)
	}
	rows = append(rows, row)

	_, hitsBefore, err := e.poolState(ctx)
	if err != nil {
		return nil, err
	}
	row, err = e.coldFirstToken(ctx, n, e.poolAgent, poolSize)
	if err != nil {
		return nil, fmt.Errorf("cold Session from the pool: %w", err)
	}
	_, hitsAfter, err := e.poolState(ctx)
	if err != nil {
		return nil, err
	}
	row.Scenario = "first token, cold Session from a warm pool"
	row.Aim = atMost(150, "ms", "added p50", *row.AddedP50)
	row.Note = fmt.Sprintf("clock from POST conversations; pool of %d, full before each sample; %d of %d boxes claimed from it",
		poolSize, hitsAfter-hitsBefore, n)
	rows = append(rows, row)

	row, err = e.coldFirstToken(ctx, n, e.coldAgent, 0)
	if err != nil {
		return nil, fmt.Errorf("cold Session without a pool: %w", err)
	}
	row.Scenario = "first token, cold Session, no pool"
	row.Note = "clock from POST conversations; box created on demand"
	rows = append(rows, row)
	return rows, nil
}

// warmFirstToken is the warm-Session row: one Session of agentID whose
// runtime is up and has answered once, then n replies, each after the
// previous ended.
func (e *platformEnv) warmFirstToken(ctx context.Context, n int, agentID string) (PlatformRow, error) {
	sid, err := e.newSession(ctx, agentID)
	if err != nil {
		return PlatformRow{}, err
	}
	defer e.deleteSession(context.WithoutCancel(ctx), sid)
	if err := e.waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
		return PlatformRow{}, err
	}
	if _, err := e.reply(ctx, sid, time.Time{}); err != nil { // the program's first model call
		return PlatformRow{}, err
	}
	var through, direct []time.Duration
	for range n {
		if err := e.waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
			return PlatformRow{}, err
		}
		d, err := e.model.firstChunk(ctx, e.hc)
		if err != nil {
			return PlatformRow{}, err
		}
		direct = append(direct, d)
		tr, err := e.reply(ctx, sid, time.Time{})
		if err != nil {
			return PlatformRow{}, err
		}
		through = append(through, tr.FirstToken)
	}
	row := PlatformRow{Scenario: "first token, warm Session", Backend: e.backend,
		Subject: seriesOf("through AstraBox", through)}.withReference(seriesOf("fake model direct", direct))
	row.Aim = atMost(5, "ms", "added p50", *row.AddedP50)
	row.Note = "POST turn-inputs → first text-delta on the ai-stream"
	return row, nil
}

// coldFirstToken measures n new Sessions of agentID, each deleted after
// its reply; with poolSize > 0 it first waits until the pool is full.
func (e *platformEnv) coldFirstToken(ctx context.Context, n int, agentID string, poolSize int) (PlatformRow, error) {
	var through, direct []time.Duration
	for range n {
		if poolSize > 0 {
			if err := e.waitPool(ctx, poolSize); err != nil {
				return PlatformRow{}, err
			}
		}
		d, err := e.model.firstChunk(ctx, e.hc)
		if err != nil {
			return PlatformRow{}, err
		}
		direct = append(direct, d)
		t0 := time.Now()
		sid, err := e.newSession(ctx, agentID)
		if err != nil {
			return PlatformRow{}, err
		}
		tr, err := e.reply(ctx, sid, t0)
		if derr := e.deleteSession(context.WithoutCancel(ctx), sid); err == nil {
			err = derr
		}
		if err != nil {
			return PlatformRow{}, err
		}
		through = append(through, tr.FirstToken)
	}
	return PlatformRow{Backend: e.backend, Subject: seriesOf("through AstraBox", through)}.
		withReference(seriesOf("fake model direct", direct)), nil
}

// waitPool waits, polling every 5 ms, until the warm pool of the pool
// profile holds size ready boxes.
func (e *platformEnv) waitPool(ctx context.Context, size int) error {
	deadline := time.Now().Add(poolFillTimeout)
	for {
		ready, _, err := e.poolState(ctx)
		if err != nil {
			return err
		}
		if ready >= size {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d of %d boxes ready after %s", errNoPool, ready, size, poolFillTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// poolState reads the server's metrics: the pool profile's ready boxes
// and the creates that claimed one so far.
func (e *platformEnv) poolState(ctx context.Context) (ready, hits int, err error) {
	var buf bytes.Buffer
	if err := e.srv.Sandboxes.WriteMetrics(ctx, &buf); err != nil {
		return 0, 0, fmt.Errorf("bench: metrics: %w", err)
	}
	pool := `{pool="` + poolProfile + `/`
	for _, line := range strings.Split(buf.String(), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || !strings.Contains(line, pool) {
			continue
		}
		v, _ := strconv.Atoi(line[i+1:])
		switch {
		case strings.HasPrefix(line, "astrabox_pool_ready{"):
			ready += v
		case strings.HasPrefix(line, "astrabox_pool_claims_total{") && strings.Contains(line, `outcome="hit"`):
			hits += v
		}
	}
	return ready, hits, nil
}
