// Package sse writes and reads Server-Sent Events frames (id:, event:,
// data:) as the WHATWG HTML specification defines them.
package sse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Writer writes SSE frames to an HTTP response, flushing after each, so
// that every event reaches the client the moment it is written. It is safe
// for concurrent use.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	flusher http.Flusher
	started bool
	hdr     http.Header
}

// NewWriter prepares w for an event stream. Headers are sent with the
// first frame, so a handler can still answer with an error before that.
func NewWriter(w http.ResponseWriter) *Writer {
	f, _ := w.(http.Flusher)
	return &Writer{w: w, flusher: f, hdr: w.Header()}
}

func (s *Writer) start() {
	if s.started {
		return
	}
	s.started = true
	s.hdr.Set("Content-Type", "text/event-stream")
	s.hdr.Set("Cache-Control", "no-cache")
	s.hdr.Set("X-Accel-Buffering", "no")
}

// Event writes one frame. id and event may be empty; data is encoded as one
// line of JSON (JSON never contains a raw newline), which is what clients
// that parse only `data:` lines expect.
func (s *Writer) Event(id, event string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	var buf strings.Builder
	if id != "" {
		buf.WriteString("id: ")
		buf.WriteString(sanitize(id))
		buf.WriteByte('\n')
	}
	if event != "" {
		buf.WriteString("event: ")
		buf.WriteString(sanitize(event))
		buf.WriteByte('\n')
	}
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	return s.write(buf.String())
}

// EventJSON writes one frame whose data is data, which must be one line of
// valid JSON.
func (s *Writer) EventJSON(id, event string, data []byte) error {
	buf := make([]byte, 0, len(data)+len(id)+len(event)+24)
	if id != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, sanitize(id)...)
		buf = append(buf, '\n')
	}
	if event != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, sanitize(event)...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	return s.writeBytes(buf)
}

// WriteFrames writes frames already encoded (each "id:", "event:" and
// "data:" lines ending in a blank line) with one write and one flush, so that a burst of
// many small events costs one system call.
func (s *Writer) WriteFrames(frames []byte) error {
	if len(frames) == 0 {
		return nil
	}
	return s.writeBytes(frames)
}

// Comment writes a comment frame (": text"), used as a keep-alive.
func (s *Writer) Comment(text string) error {
	return s.write(": " + sanitize(text) + "\n\n")
}

// Flush sends the headers (and anything buffered) now.
func (s *Writer) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

func (s *Writer) write(frame string) error {
	return s.writeBytes([]byte(frame))
}

func (s *Writer) writeBytes(frame []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	if _, err := s.w.Write(frame); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}

func sanitize(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

// Frame is one parsed event.
type Frame struct {
	ID    string
	Event string
	Data  string // data lines joined with "\n"
}

// ErrFrameTooLarge is returned by Reader.Next for a line over the limit.
var ErrFrameTooLarge = errors.New("sse: frame too large")

// Reader parses frames from an event stream.
type Reader struct {
	r     *bufio.Reader
	limit int
	raw   RawFrame // NextRaw's buffers, reused
	long  []byte   // a line longer than the buffer, reused
}

// RawFrame is one parsed event whose fields are only valid until the next
// call of NextRaw.
type RawFrame struct {
	ID    []byte
	Event []byte
	Data  []byte // data lines joined with "\n"
}

// NewReader returns a Reader over r that refuses lines longer than limit
// bytes (limit <= 0 means 16 MiB).
func NewReader(r io.Reader, limit int) *Reader {
	if limit <= 0 {
		limit = 16 << 20
	}
	return &Reader{r: bufio.NewReaderSize(r, 256<<10), limit: limit}
}

// Next returns the next frame that has data. It returns io.EOF at the end
// of the stream; a frame cut off by the end of the stream is dropped.
func (r *Reader) Next() (Frame, error) {
	var f Frame
	var data []string
	has := false
	for {
		line, err := r.readLine()
		if err != nil {
			return Frame{}, err
		}
		if line == "" {
			if has {
				f.Data = strings.Join(data, "\n")
				return f, nil
			}
			f = Frame{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			f.ID = value
		case "event":
			f.Event = value
		case "data":
			data = append(data, value)
			has = true
		}
	}
}

// NextRaw is Next without allocating: the frame's fields are only valid
// until the next call. Next and NextRaw may not be mixed on one Reader.
func (r *Reader) NextRaw() (RawFrame, error) {
	f := &r.raw
	f.ID, f.Event, f.Data = f.ID[:0], f.Event[:0], f.Data[:0]
	has := false
	for {
		line, err := r.readLineBytes()
		if err != nil {
			return RawFrame{}, err
		}
		if len(line) == 0 {
			if has {
				return *f, nil
			}
			f.ID, f.Event = f.ID[:0], f.Event[:0]
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "id":
			f.ID = append(f.ID[:0], value...)
		case "event":
			f.Event = append(f.Event[:0], value...)
		case "data":
			if has {
				f.Data = append(f.Data, '\n')
			}
			f.Data = append(f.Data, value...)
			has = true
		}
	}
}

// readLineBytes is readLine returning bytes valid until the next read.
func (r *Reader) readLineBytes() ([]byte, error) {
	line, err := r.r.ReadSlice('\n')
	if err == nil {
		if len(line) > r.limit+2 {
			return nil, ErrFrameTooLarge
		}
		return trimEOLBytes(line), nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	r.long = append(r.long[:0], line...)
	for {
		if len(r.long) > r.limit {
			return nil, ErrFrameTooLarge
		}
		line, err = r.r.ReadSlice('\n')
		r.long = append(r.long, line...)
		if err == nil {
			if len(r.long) > r.limit+2 {
				return nil, ErrFrameTooLarge
			}
			return trimEOLBytes(r.long), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

func trimEOLBytes(b []byte) []byte {
	b = b[:len(b)-1]
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

func (r *Reader) readLine() (string, error) {
	line, err := r.r.ReadSlice('\n')
	if err == nil {
		if len(line) > r.limit+2 {
			return "", ErrFrameTooLarge
		}
		return trimEOL(line), nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return "", err
	}
	// A line longer than the buffer: collect it.
	buf := append([]byte(nil), line...)
	for {
		if len(buf) > r.limit {
			return "", ErrFrameTooLarge
		}
		line, err = r.r.ReadSlice('\n')
		buf = append(buf, line...)
		if err == nil {
			if len(buf) > r.limit+2 {
				return "", ErrFrameTooLarge
			}
			return trimEOL(buf), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return "", err
		}
	}
}

// trimEOL converts a line to a string without its "\n" or "\r\n".
func trimEOL(b []byte) string {
	b = b[:len(b)-1]
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return string(b)
}
