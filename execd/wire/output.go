package wire

import (
	"bytes"
	"strconv"

	"github.com/astrabox/astrabox/internal/jsonstr"
)

// AppendOutputEvent appends the JSON of a stdout or stderr Event with text
// and timestamp to dst. It is what json.Marshal(Event{...}) produces, minus
// HTML escaping, without reflection: output events are the hot path of
// every stream.
func AppendOutputEvent(dst []byte, typ, text string, timestamp int64) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","text":`...)
	dst = jsonstr.Append(dst, text)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, timestamp, 10)
	return append(dst, '}')
}

// AppendOutputEventBytes is AppendOutputEvent for text held in a byte
// slice (only read, not retained).
func AppendOutputEventBytes(dst []byte, typ string, text []byte, timestamp int64) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","text":`...)
	dst = jsonstr.AppendBytes(dst, text)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, timestamp, 10)
	return append(dst, '}')
}

var (
	stdoutPrefix = []byte(`{"type":"stdout","text":`)
	stderrPrefix = []byte(`{"type":"stderr","text":`)
	tsKey        = []byte(`,"timestamp":`)
)

// ParseOutputEvent decodes data when it has exactly the shape that
// AppendOutputEvent produces, and reports whether it did; callers fall back
// to encoding/json otherwise.
func ParseOutputEvent(data []byte) (Event, bool) {
	var ev Event
	switch {
	case bytes.HasPrefix(data, stdoutPrefix):
		ev.Type = EventStdout
	case bytes.HasPrefix(data, stderrPrefix):
		ev.Type = EventStderr
	default:
		return Event{}, false
	}
	rest := data[len(stdoutPrefix):]
	text, n, err := jsonstr.Unquote(rest)
	if err != nil {
		return Event{}, false
	}
	rest = rest[n:]
	if !bytes.HasPrefix(rest, tsKey) || len(rest) < len(tsKey)+2 || rest[len(rest)-1] != '}' {
		return Event{}, false
	}
	ts, err := strconv.ParseInt(string(rest[len(tsKey):len(rest)-1]), 10, 64)
	if err != nil {
		return Event{}, false
	}
	ev.Text, ev.Timestamp = text, ts
	return ev, true
}
