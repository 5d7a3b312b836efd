package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/sandbox"
)

// Native state. A program's own conversation file is mirrored into the
// store by byte offset: after each reply, before an idle runtime is
// released, and on the program's hint that it grew (engine.StateGrew). A
// hint mirrors at most once every mirrorInterval, and during a reply only
// once the reply has run that long (a copy per record would put a download
// from the box on the reply's path, and a box that repeats the hint would
// have the server download without pause); a hint that comes sooner is kept
// and acted on when the interval has passed.
//
// What a mirror costs the server is bounded by the Session's
// native_state_bytes, never by what the box claims. The file's size is read
// first (execd's file info): a file past the limit is refused without a
// byte read (NATIVE_STATE_TOO_LARGE, recorded once per runtime as a
// native_state.refused control event; nothing more is mirrored from that
// runtime, and the store keeps the state of the last mirror within the
// limit, which a replacement runtime resumes). Otherwise exactly the new
// range that size names is read, streamed in chunks of at most nativeChunk,
// each appended to the store as it arrives. So a sparse file (whose holes
// cost the box nothing but are bytes the program reads back, and count as
// such), a file that grows meanwhile, or one that is not what it claims,
// costs at most the limit in the store and one chunk in memory.

// mirrorInterval is the least time between mirrors a hint starts.
const mirrorInterval = 10 * time.Second

// nativeChunk bounds one read of the native state and one store append.
const nativeChunk = 1 << 20

// mirrorWait returns how long a hint to mirror at now must wait: 0 when it
// may mirror at once.
func (r *runner) mirrorWait(now time.Time) time.Duration {
	wait := r.lastMirror.Add(mirrorInterval).Sub(now)
	if r.turn != nil && !r.turn.started.IsZero() {
		wait = max(wait, r.turn.started.Add(mirrorInterval).Sub(now))
	}
	return max(wait, 0)
}

// stateGrew handles the program's hint that its native state grew: the
// mirror to run now, or nil when it is kept for later (mirrorDue).
func (r *runner) stateGrew(now time.Time) after {
	wait := r.mirrorWait(now)
	if wait == 0 {
		return r.mirrorNative
	}
	if r.mirrorLater == nil {
		r.mirrorLater = time.NewTimer(wait)
	}
	return nil
}

// mirrorDue fires when a kept hint may mirror (never when none is kept).
func (r *runner) mirrorDue() <-chan time.Time {
	if r.mirrorLater == nil {
		return nil
	}
	return r.mirrorLater.C
}

// mirrorNative copies what the program's native state file gained since
// the last save into the store, fenced by the lease (see the comment at
// the top of this file). Only a store error is returned: a box that cannot
// be read is left to the next mirror.
func (r *runner) mirrorNative(ctx context.Context) error {
	if r.mirrorLater != nil {
		r.mirrorLater.Stop() // this mirror answers the kept hint
		r.mirrorLater = nil
	}
	if r.rt == nil || r.rt.rec.StatePath == "" || r.nativeRefused {
		return nil
	}
	r.lastMirror = time.Now()
	path := r.rt.rec.StatePath
	infos, err := r.rt.ex.Info(ctx, path)
	if err != nil {
		if execdclient.CodeOf(err) != sandbox.CodeFileNotFound {
			r.log.Info("read native state's size", "err", err)
		}
		return nil
	}
	fi, ok := infos[path]
	switch {
	case !ok || fi.Size <= r.nativeSize:
		return nil // nothing new
	case fi.Type != "file":
		r.log.Info("native state is not a regular file; not mirrored", "type", fi.Type)
		return nil
	case r.limits.NativeStateBytes > 0 && fi.Size > r.limits.NativeStateBytes:
		return r.refuseNative(ctx, fi.Size)
	}
	n := fi.Size - r.nativeSize
	body, err := r.rt.ex.Download(ctx, path, r.nativeSize, n)
	if err != nil {
		switch execdclient.CodeOf(err) {
		case sandbox.CodeRangeNotSatisfiable, sandbox.CodeFileNotFound:
			return nil // the file shrank or went since its size was read
		}
		r.log.Info("read native state", "err", err)
		return nil
	}
	defer body.Close()
	start := r.nativeSize
	if err := r.copyNative(ctx, io.LimitReader(body, n), min(n, nativeChunk)); err != nil {
		return err
	}
	if r.nativeSize == start {
		return nil
	}
	_, err = r.append(ctx, r.control("native_state.saved", map[string]any{"bytes": r.nativeSize}))
	return err
}

// copyNative appends what src holds to the stored native state, a chunk
// of at most chunk bytes at a time, advancing nativeSize with each. A read
// error ends the copy (what was appended stays); a store error is returned.
func (r *runner) copyNative(ctx context.Context, src io.Reader, chunk int64) error {
	buf := make([]byte, chunk)
	for {
		n, rerr := io.ReadFull(src, buf)
		if n > 0 {
			size, err := r.m.st.AppendNativeState(ctx, r.id, r.epoch, r.nativeSize, buf[:n])
			if err != nil {
				return fmt.Errorf("save native state: %w", err)
			}
			r.nativeSize = size
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
				r.log.Info("read native state", "err", rerr)
			}
			return nil
		}
	}
}

// refuseNative records that the runtime's native state of size bytes is
// past the Session's limit; nothing more is mirrored from the runtime.
func (r *runner) refuseNative(ctx context.Context, size int64) error {
	r.nativeRefused = true
	limit := r.limits.NativeStateBytes
	msg := fmt.Sprintf("the program's native state is %d bytes, past the session's limit of %d bytes (session_limits.native_state_bytes): "+
		"it is no longer saved, and a replacement runtime resumes the %d bytes saved last", size, limit, r.nativeSize)
	r.log.Warn("native state refused: past the session's limit", "bytes", size, "limit", limit, "stored", r.nativeSize)
	_, err := r.append(ctx, r.control("native_state.refused", map[string]any{"code": CodeNativeStateTooLarge, "message": msg,
		"bytes": size, "limit": limit, "stored_bytes": r.nativeSize}))
	return err
}
