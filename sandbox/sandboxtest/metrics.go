package sandboxtest

import (
	"errors"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
)

func testMetrics(t *testing.T, h Harness) {
	b := NewBox(t, h, nil)
	ctx := ctxFor(t, time.Minute)
	plausible := func(t *testing.T, m wire.Metrics) {
		t.Helper()
		if m.CPUCount <= 0 || m.MemUsedMiB <= 0 || m.MemTotalMiB <= m.MemUsedMiB || m.CPUUsedPct < 0 || m.CPUUsedPct > 100 || m.Timestamp <= 0 {
			t.Fatalf("implausible metrics %+v", m)
		}
	}

	t.Run("Get", func(t *testing.T) {
		m, err := b.Client.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plausible(t, m)
	})

	t.Run("Watch", func(t *testing.T) {
		var got []wire.Metrics
		errEnough := errors.New("enough")
		err := b.Client.WatchMetrics(ctx, func(m wire.Metrics) error {
			got = append(got, m)
			if len(got) == 2 {
				return errEnough
			}
			return nil
		})
		if !errors.Is(err, errEnough) {
			t.Fatalf("watch ended with %v after %d events", err, len(got))
		}
		for _, m := range got {
			plausible(t, m)
		}
		if got[1].Timestamp <= got[0].Timestamp {
			t.Fatalf("timestamps do not advance: %d then %d", got[0].Timestamp, got[1].Timestamp)
		}
	})
}
