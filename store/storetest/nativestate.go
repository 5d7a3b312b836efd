package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// checkNativeState fails t unless the session's stored bytes are want (nil:
// none).
func checkNativeState(t *testing.T, st store.Store, sessionID string, want []byte) {
	t.Helper()
	got, err := st.NativeState(t.Context(), sessionID)
	if err != nil {
		t.Fatalf("native state of %s: %v", sessionID, err)
	}
	if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
		t.Errorf("native state of %s = %.60q, want %.60q", sessionID, got, want)
	}
}

// testNativeState saves by offset as a runner mirroring a file does:
// repeated and overlapping saves keep one copy of each byte, a gap and a
// stale epoch are refused.
func testNativeState(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreateSession(t, st, newSession("s"))
	checkNativeState(t, st, "s", nil)
	l, err := st.AcquireLease(ctx, "s", "runner", time.Minute)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	e := l.Epoch
	steps := []struct {
		name   string
		epoch  int64
		offset int64
		data   string
		size   int64
		want   error
		stored string
	}{
		{"first", e, 0, "abc", 3, nil, "abc"},
		{"next", e, 3, "def\n", 7, nil, "abcdef\n"},
		{"repeated", e, 0, "abcdef\n", 7, nil, "abcdef\n"},
		{"overlapping", e, 4, "ef\ngh", 9, nil, "abcdef\ngh"},
		{"inside", e, 2, "cd", 9, nil, "abcdef\ngh"},
		{"nothing at the end", e, 9, "", 9, nil, "abcdef\ngh"},
		{"gap", e, 10, "xy", 0, store.ErrConflict, "abcdef\ngh"},
		{"gap of nothing", e, 12, "", 0, store.ErrConflict, "abcdef\ngh"},
		{"unfenced", 0, 9, "ij", 11, nil, "abcdef\nghij"},
		{"stale epoch", e + 1, 11, "k", 0, store.ErrFenced, "abcdef\nghij"},
		{"binary", e, 11, "\x00\xff\x00", 14, nil, "abcdef\nghij\x00\xff\x00"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			size, err := st.AppendNativeState(ctx, "s", s.epoch, s.offset, []byte(s.data))
			checkErr(t, "append", err, s.want)
			if s.want == nil && size != s.size {
				t.Errorf("size = %d, want %d", size, s.size)
			}
			checkNativeState(t, st, "s", []byte(s.stored))
		})
	}
	stored := []byte(steps[len(steps)-1].stored)

	t.Run("sessions apart", func(t *testing.T) {
		if size, err := st.AppendNativeState(ctx, "other", 0, 0, []byte("z")); err != nil || size != 1 {
			t.Fatalf("append to another session: %d, %v", size, err)
		}
		checkNativeState(t, st, "other", []byte("z"))
		checkNativeState(t, st, "s", stored)
	})

	t.Run("reset", func(t *testing.T) {
		checkErr(t, "reset with a stale epoch", st.ResetNativeState(ctx, "s", e+1), store.ErrFenced)
		checkNativeState(t, st, "s", stored)
		if err := st.ResetNativeState(ctx, "s", e); err != nil {
			t.Fatalf("reset: %v", err)
		}
		checkNativeState(t, st, "s", nil)
		if err := st.ResetNativeState(ctx, "s", e); err != nil {
			t.Errorf("reset of nothing: %v", err)
		}
		_, err := st.AppendNativeState(ctx, "s", e, 3, []byte("x"))
		checkErr(t, "append past a reset state", err, store.ErrConflict)
		if size, err := st.AppendNativeState(ctx, "s", e, 0, []byte("new")); err != nil || size != 3 {
			t.Errorf("append after reset: %d, %v", size, err)
		}
		checkNativeState(t, st, "s", []byte("new"))
	})

	t.Run("taken over", func(t *testing.T) {
		if err := st.ReleaseLease(ctx, "s", "runner", e); err != nil {
			t.Fatalf("release: %v", err)
		}
		l2, err := st.AcquireLease(ctx, "s", "next", time.Minute)
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		_, err = st.AppendNativeState(ctx, "s", e, 3, []byte("old"))
		checkErr(t, "append by the old holder", err, store.ErrFenced)
		checkErr(t, "reset by the old holder", st.ResetNativeState(ctx, "s", e), store.ErrFenced)
		if size, err := st.AppendNativeState(ctx, "s", l2.Epoch, 3, []byte("er")); err != nil || size != 5 {
			t.Errorf("append by the new holder: %d, %v", size, err)
		}
		checkNativeState(t, st, "s", []byte("newer"))
	})
}

// testNativeStateLarge saves a large file in pieces of different sizes,
// each overlapping the last.
func testNativeStateLarge(t *testing.T, st store.Store) {
	ctx := t.Context()
	file := blob(3 << 20)
	var offset int64
	for _, n := range []int64{1, 1 << 20, 100, 2 << 20, 3 << 20} {
		end := min(offset+n, int64(len(file)))
		from := max(offset-10, 0) // re-send a little of what is stored
		size, err := st.AppendNativeState(ctx, "s", 0, from, file[from:end])
		if err != nil || size != end {
			t.Fatalf("append [%d, %d): size %d, %v; want %d", from, end, size, err, end)
		}
		offset = end
	}
	checkNativeState(t, st, "s", file)
}
