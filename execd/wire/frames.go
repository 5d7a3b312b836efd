package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MediaTypeFrames (addition) is a compact alternative to Server-Sent
// Events for execution streams, chosen by a client that lists it in Accept
// before text/event-stream. Each frame is a header of 13 bytes — the kind
// (FrameStdout, FrameStderr or FrameEvent), the big-endian uint64 resume
// offset after the frame (output frames; 0 otherwise) and the big-endian
// uint32 payload length — then the payload: raw output bytes, or an Event as
// JSON. Output needs no escaping, so streams run at pipe speed.
const MediaTypeFrames = "application/vnd.astrabox.frames"

// Frame kinds.
const (
	FrameStdout byte = 'o'
	FrameStderr byte = 'e'
	FrameEvent  byte = 'j'
)

// FrameHeaderSize is the size of a frame header.
const FrameHeaderSize = 13

// MaxFramePayload bounds a frame's payload.
const MaxFramePayload = 16 << 20

// AppendFrameHeader appends a frame header to dst.
func AppendFrameHeader(dst []byte, kind byte, offset uint64, n int) []byte {
	dst = append(dst, kind)
	dst = binary.BigEndian.AppendUint64(dst, offset)
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// ErrFrame reports a malformed frame stream.
var ErrFrame = errors.New("malformed frame")

// ReadFrame reads one frame from r into buf (grown as needed) and returns
// its kind, offset and payload (valid until the next call). It returns
// io.EOF at a clean end of stream.
func ReadFrame(r io.Reader, buf []byte) (kind byte, offset uint64, payload []byte, _ []byte, err error) {
	var h [FrameHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: truncated header", ErrFrame)
		}
		return 0, 0, nil, buf, err
	}
	kind, offset = h[0], binary.BigEndian.Uint64(h[1:9])
	n := binary.BigEndian.Uint32(h[9:13])
	if kind != FrameStdout && kind != FrameStderr && kind != FrameEvent {
		return 0, 0, nil, buf, fmt.Errorf("%w: unknown kind %q", ErrFrame, kind)
	}
	if n > MaxFramePayload {
		return 0, 0, nil, buf, fmt.Errorf("%w: payload of %d bytes", ErrFrame, n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	payload = buf[:n]
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, 0, nil, buf, fmt.Errorf("%w: truncated payload: %v", ErrFrame, err)
	}
	return kind, offset, payload, buf, nil
}
