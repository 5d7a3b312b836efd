package execd

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/execd/wire"
)

// keepAlive is how often an idle event stream gets a comment frame, so that
// proxies and clients do not time it out.
const keepAlive = 15 * time.Second

// maxEventBytes bounds the text of one output event.
const maxEventBytes = 64 << 10

func nowMillis() int64 { return time.Now().UnixMilli() }

// streamOutput writes log's output from offset `from` as stdout/stderr
// events whose SSE id is the offset to resume from. With follow it waits for
// more until the log is complete; without, it stops after what is there. It
// returns the offset reached, or ctx's error when the client went away.
//
// While following, the stream holds a Follower on the log, so a slow client
// slows the command down rather than lose output.
//
// Text is valid UTF-8 where the output is: a multi-byte character split
// between reads is held back and sent whole with the next event.
//
// follower, when not nil, is a Follower already attached at from (to cover
// the time before this call); streamOutput advances and detaches it.
func streamOutput(ctx context.Context, sw *eventWriter, log *outlog.Log, from int64, follow bool, follower *outlog.Follower) (int64, error) {
	var carry [3][]byte
	pos := from
	if follower == nil && follow {
		follower = log.Follow(from)
	}
	if follower != nil {
		defer follower.Detach()
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		changed := log.Changed()
		res := log.Read(pos, maxEventBytes)
		if res.Lost > 0 {
			ev := wire.Event{Type: wire.EventStatus, Timestamp: nowMillis(), Lost: res.Lost,
				Text: fmt.Sprintf("%d bytes of output were no longer retained", res.Lost)}
			if err := sw.Event("", ev.Type, ev); err != nil {
				return pos, err
			}
		}
		for _, p := range res.Pieces {
			data := p.Data
			if c := carry[p.Stream]; len(c) > 0 {
				data = append(append([]byte(nil), c...), data...)
			}
			var held []byte
			data, held = splitIncompleteRune(data)
			carry[p.Stream] = held
			if len(data) == 0 {
				continue
			}
			id := strconv.FormatInt(p.Offset+int64(len(p.Data))-int64(len(held)), 10)
			if err := writeOutput(sw, id, p.Stream, data); err != nil {
				return pos, err
			}
		}
		pos = res.Next
		if follower != nil {
			follower.Advance(pos)
		}
		if res.Done || (!follow && len(res.Pieces) == 0) {
			for s, c := range carry {
				if len(c) > 0 {
					if err := writeOutput(sw, strconv.FormatInt(pos, 10), outlog.Stream(s), c); err != nil {
						return pos, err
					}
				}
			}
			return pos, nil
		}
		if len(res.Pieces) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-tick.C:
			if err := sw.Comment("ping"); err != nil {
				return pos, err
			}
		case <-ctx.Done():
			return pos, ctx.Err()
		}
	}
}

func writeOutput(sw *eventWriter, id string, s outlog.Stream, data []byte) error {
	return sw.Output(id, s, data)
}

// splitIncompleteRune splits off a trailing, incomplete UTF-8 sequence.
func splitIncompleteRune(b []byte) (whole, tail []byte) {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], b[i:]
			}
			break
		}
	}
	return b, nil
}
