package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/postgres"
)

// maxAppendsPerWriter bounds the appends of one writer in one row.
const maxAppendsPerWriter = 200_000

// appendCase is one append row: writers concurrent writers, each on its
// own stream, each appending batches of batch entries.
type appendCase struct {
	batch, writers int
}

// appendCases are the rows of the append scenario: the runner's batch
// sizes for one Session, then several Sessions writing at once.
var appendCases = []appendCase{{1, 1}, {16, 1}, {64, 1}, {16, 8}}

// appendPayload is a text-delta chunk of about 100 bytes, as the runner
// stores a model's token.
var appendPayload = func() json.RawMessage {
	head := `{"type":"text-delta","id":"txt_bench","delta":"`
	return json.RawMessage(head + strings.Repeat("x", 100-len(head)-2) + `"}`)
}()

// measureAppends appends to fresh log streams of st (named storeName in
// the rows) through store.Streams.Append, fenced by a lease epoch as the
// runner writes, for budget per row (or maxAppendsPerWriter appends per
// writer, whichever ends first), and reports the entries committed per
// second and the latency of each Append call. The streams belong to
// Session records made for the purpose, deleted afterwards with their
// entries.
func measureAppends(ctx context.Context, st store.Store, storeName string, budget time.Duration) ([]PlatformRow, error) {
	var rows []PlatformRow
	for _, c := range appendCases {
		row, err := appendRow(ctx, st, c, budget)
		if err != nil {
			return rows, fmt.Errorf("append to %s, batch %d, %d writers: %w", storeName, c.batch, c.writers, err)
		}
		row.Backend = storeName
		rows = append(rows, row)
	}
	return rows, nil
}

// appendRow measures one case.
func appendRow(ctx context.Context, st store.Store, c appendCase, budget time.Duration) (PlatformRow, error) {
	ids := make([]string, c.writers)
	epochs := make([]int64, c.writers)
	defer func() {
		for _, id := range ids {
			if id != "" {
				_ = st.DeleteSession(context.WithoutCancel(ctx), id)
			}
		}
	}()
	for w := range c.writers {
		id := fmt.Sprintf("bench-append-%d-%d-%d", c.batch, w, time.Now().UnixNano())
		if err := st.CreateSession(ctx, &store.Session{ID: id, AgentID: "bench", EngineKind: "astrabox", State: "READY", Title: "bench"}); err != nil {
			return PlatformRow{}, fmt.Errorf("create session: %w", err)
		}
		ids[w] = id
		lease, err := st.AcquireLease(ctx, id, "bench", budget+time.Minute)
		if err != nil {
			return PlatformRow{}, fmt.Errorf("acquire lease: %w", err)
		}
		epochs[w] = lease.Epoch
	}
	entries := make([]store.LogEntry, c.batch)
	for i := range entries {
		entries[i] = store.LogEntry{Type: "text-delta", TurnID: "turn_bench", InputID: "in_bench", MessageID: "msg_in_bench", Payload: appendPayload}
	}
	lat := make([][]time.Duration, c.writers)
	errs := make([]error, c.writers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(budget)
	for w := range c.writers {
		wg.Go(func() {
			for range maxAppendsPerWriter {
				if !time.Now().Before(deadline) {
					return
				}
				t := time.Now()
				if _, err := st.Append(ctx, ids[w], epochs[w], entries); err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return PlatformRow{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	rate := float64(len(all)*c.batch) / elapsed.Seconds()
	writers := "1 writer"
	if c.writers > 1 {
		writers = fmt.Sprintf("%d writers at once, a Session each", c.writers)
	}
	return PlatformRow{Scenario: fmt.Sprintf("log append, batches of %d", c.batch), Subject: seriesOf("per Append call", all),
		Rate: rate, Aim: atLeast(20000, "frames/s", rate),
		Note: fmt.Sprintf("%s, %d-byte payloads, fenced, %s", writers, len(appendPayload), elapsed.Round(time.Millisecond))}, nil
}

// openBenchPostgres opens a PostgreSQL store for the append rows: in a
// scratch database created on dsn's server (UTF8, C locale) and dropped by
// cleanup, or, when it cannot be created (no CREATEDB right), in dsn's own
// database, where the rows' Session records are deleted with their
// entries and only the schema (migrated if needed) stays. note says which.
func openBenchPostgres(ctx context.Context, dsn string) (st store.Store, cleanup func(), note string, err error) {
	scratch, drop, err := postgres.CreateScratch(ctx, dsn, "astrabox_bench_")
	if err != nil {
		pg, oerr := postgres.Open(ctx, dsn)
		if oerr != nil {
			return nil, nil, "", fmt.Errorf("open PostgreSQL: %w", oerr)
		}
		return pg, func() { _ = pg.Close() }, fmt.Sprintf("PostgreSQL rows in the DSN's own database (no scratch database: %v)", err), nil
	}
	pg, err := postgres.Open(ctx, scratch)
	if err != nil {
		drop()
		return nil, nil, "", fmt.Errorf("open PostgreSQL: %w", err)
	}
	return pg, func() { _ = pg.Close(); drop() }, "PostgreSQL rows in a scratch database, dropped afterwards", nil
}
