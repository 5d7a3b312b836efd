package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/astrabox/astrabox/store"
)

// maxTracked bounds the commit times a commitLog keeps per stream.
const maxTracked = 1_000_000

// commitLog notes when each entry of the tracked streams was committed:
// the moment the writer's Append returned, before its followers are
// woken. It is safe for concurrent use.
type commitLog struct {
	mu      sync.Mutex
	streams map[string]map[int64]time.Time
}

func newCommitLog() *commitLog { return &commitLog{streams: map[string]map[int64]time.Time{}} }

// track starts noting the commits of stream.
func (c *commitLog) track(stream string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streams[stream] == nil {
		c.streams[stream] = map[int64]time.Time{}
	}
}

// untrack stops noting the commits of stream and forgets them.
func (c *commitLog) untrack(stream string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, stream)
}

// record notes that entries first .. first+n-1 of stream committed at t.
func (c *commitLog) record(stream string, first int64, n int, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.streams[stream]
	if m == nil || len(m)+n > maxTracked {
		return
	}
	for i := range int64(n) {
		m[first+i] = t
	}
}

// at returns when entry seq of stream committed (false if not noted).
func (c *commitLog) at(stream string, seq int64) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.streams[stream][seq]
	return t, ok
}

// timedStore is the server's store with Append's commits noted in a
// commitLog; every other method is the store's own.
type timedStore struct {
	store.Store
	commits *commitLog
}

// Append implements store.Streams, noting the commit time of entries.
func (s *timedStore) Append(ctx context.Context, stream string, epoch int64, entries []store.LogEntry) (int64, error) {
	first, err := s.Store.Append(ctx, stream, epoch, entries)
	if err == nil && len(entries) > 0 {
		s.commits.record(stream, first, len(entries), time.Now())
	}
	return first, err
}

// measureFollowers has k concurrent clients follow one Session's ai-stream
// (follow=session) through a reply of many text deltas, and measures per
// frame and client the time from the frame's commit at the writer to its
// receipt by the client. Each of rounds replies is followed by one client
// (the reference) and then by k. It returns the row and the seqs of the
// last reply's first and last frames (for the resume scenario).
func (e *platformEnv) measureFollowers(ctx context.Context, sid string, k, rounds, deltas int, gap time.Duration) (PlatformRow, [2]int64, error) {
	e.commits.track(sid)
	defer e.commits.untrack(sid)
	e.model.setShape(replyShape{Deltas: deltas, Gap: gap}) // a frame every few ms, as a model's tokens come
	defer e.model.setShape(defaultShape)
	var one, many []time.Duration
	var last [2]int64
	for range rounds {
		for _, clients := range []int{1, k} {
			if err := e.waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
				return PlatformRow{}, last, err
			}
			lat, span, err := e.fanout(ctx, sid, clients)
			if err != nil {
				return PlatformRow{}, last, fmt.Errorf("%d followers: %w", clients, err)
			}
			if clients == 1 {
				one = append(one, lat...)
			} else {
				many = append(many, lat...)
			}
			last = span
		}
	}
	row := PlatformRow{Scenario: fmt.Sprintf("%d followers, commit → receipt per frame", k), Backend: e.backend,
		Subject: seriesOf(fmt.Sprintf("%d followers", k), many)}.withReference(seriesOf("1 follower", one))
	row.Aim = atMost(10, "ms", "p99", row.Subject.P99)
	row.Note = fmt.Sprintf("%d rounds of a reply to 1 client, then one to %d; %d text deltas %s apart; n = frames × clients",
		rounds, k, deltas, gap)
	return row, last, nil
}

// fanout opens clients ai-streams of sid, posts an input once every one
// has its response headers, and collects, for every frame each client
// received, the time from its commit to its receipt (a receipt noted
// before Append returned counts as 0). span is the reply's first and last
// seq.
func (e *platformEnv) fanout(ctx context.Context, sid string, clients int) ([]time.Duration, [2]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	streams := make([]*sessionStream, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			streams[i], errs[i] = e.openStream(ctx, "/api/v1/sessions/"+sid+"/ai-stream?follow=session")
		})
	}
	wg.Wait()
	defer func() {
		for _, s := range streams {
			if s != nil {
				s.close()
			}
		}
	}()
	for _, err := range errs {
		if err != nil {
			return nil, [2]int64{}, err
		}
	}
	type receipt struct {
		seq int64
		at  time.Time
	}
	got := make([][]receipt, clients)
	for i, s := range streams {
		wg.Go(func() {
			for range maxReplyFrames {
				f, err := s.next()
				if err != nil {
					errs[i] = fmt.Errorf("follower %d: stream ended before [DONE]: %w", i, err)
					return
				}
				if f.Done {
					return
				}
				if f.Seq > 0 {
					got[i] = append(got[i], receipt{f.Seq, f.At})
				}
			}
			errs[i] = fmt.Errorf("follower %d: over %d frames", i, maxReplyFrames)
		})
	}
	if _, err := e.send(ctx, sid, "stream a long answer"); err != nil {
		cancel()
		wg.Wait()
		return nil, [2]int64{}, err
	}
	wg.Wait()
	var out []time.Duration
	span := [2]int64{}
	for i, rs := range got {
		if errs[i] != nil {
			return nil, span, errs[i]
		}
		for _, r := range rs {
			c, ok := e.commits.at(sid, r.seq)
			if !ok {
				return nil, span, fmt.Errorf("follower %d received seq %d, whose commit was not noted", i, r.seq)
			}
			out = append(out, max(r.at.Sub(c), 0))
			if span[0] == 0 || r.seq < span[0] {
				span[0] = r.seq
			}
			span[1] = max(span[1], r.seq)
		}
	}
	return out, span, nil
}

// resumeTimeout bounds one resume, from the GET to its first frame.
const resumeTimeout = 30 * time.Second

// measureResume measures n reconnects of a client to Session sid with
// after_seq in the middle of the finished reply span (its first and last
// frame seqs): the time from the GET to the first replayed frame, on the
// ai-stream (which restarts the reply from its start frame) and, as the
// reference, on the raw events stream (which continues right after the
// cursor). Each connection is closed after its first frame, as a client
// that drops again would; it is a new TCP connection every time.
func (e *platformEnv) measureResume(ctx context.Context, sid string, span [2]int64, n int) (PlatformRow, error) {
	if span[0] <= 0 || span[1] < span[0] {
		return PlatformRow{}, fmt.Errorf("resume: no finished reply to resume into (span %v)", span)
	}
	cursor := span[0] + (span[1]-span[0])/2
	var ai, raw []time.Duration
	firstType := ""
	for range n {
		d, typ, err := e.firstReplayed(ctx, fmt.Sprintf("/api/v1/sessions/%s/ai-stream?after_seq=%d", sid, cursor))
		if err != nil {
			return PlatformRow{}, fmt.Errorf("resume on the ai-stream: %w", err)
		}
		ai, firstType = append(ai, d), typ
		d, _, err = e.firstReplayed(ctx, fmt.Sprintf("/api/v1/sessions/%s/events?after_seq=%d", sid, cursor))
		if err != nil {
			return PlatformRow{}, fmt.Errorf("resume on the events stream: %w", err)
		}
		raw = append(raw, d)
	}
	sess, err := e.srv.Sessions.GetSession(ctx, sid)
	if err != nil {
		return PlatformRow{}, fmt.Errorf("resume: log head: %w", err)
	}
	head := sess.LastSeq
	ref := seriesOf("events stream after_seq", raw)
	return PlatformRow{Scenario: "resume: after_seq → first replayed frame", Backend: e.backend,
		Subject: seriesOf("ai-stream after_seq", ai), Reference: &ref,
		Note: fmt.Sprintf("cursor in the middle of a finished reply of %d frames, log of %d entries; the ai-stream's first frame was %s",
			span[1]-span[0]+1, head, firstType)}, nil
}

// firstReplayed GETs path and returns the time to its first frame and
// that frame's type; the connection is closed afterwards.
func (e *platformEnv) firstReplayed(ctx context.Context, path string) (time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	start := time.Now()
	s, err := e.openStream(ctx, path)
	if err != nil {
		return 0, "", err
	}
	defer s.close()
	f, err := s.next()
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: no frame: %w", path, err)
	}
	return f.At.Sub(start), f.Type, nil
}
