// Package pydriver holds the Python side of execd's code contexts, a driver
// that turns a plain `python3 -u` into a notebook-like interpreter without
// Jupyter, and the protocol execd speaks with it.
//
// The interpreter is started with Args. Its fd 0 is /dev/null, fds 1 and 2
// are the output pipes (a cell's print, sys.stderr and subprocesses all
// write there), fd 3 (RequestFD) is a pipe execd writes to, fd 4
// (ControlFD) a pipe execd reads from. execd first writes Preamble (the
// driver source, length-prefixed) on fd 3; the driver answers with a
// "ready" message. Then, per run, execd writes one Request line and the
// driver answers on fd 4:
//
//	started  {n}                       the cell runs; SIGINT now interrupts it
//	result   {data: {mime: text}}      value of a trailing expression (not None)
//	error    {ename, evalue, traceback}
//	done     {marked: [1, 2]}          the run is over
//
// Before done, the driver writes the request's marker and a newline to
// fds 1 and 2 (listing in marked those it could write to), so that execd
// knows when it has read all of the run's output. Every message is one
// line of JSON. SIGINT is ignored while no cell runs.
package pydriver

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// File descriptors of the driver's protocol pipes in the interpreter.
const (
	RequestFD = 3
	ControlFD = 4
)

// MaxMessageBytes bounds one control message (results and tracebacks are
// clipped to 4 MiB of text by the driver).
const MaxMessageBytes = 16 << 20

//go:embed driver.py
var source []byte

// bootstrap reads the length-prefixed driver source from the request pipe
// and runs it, handing it the same buffered pipe for requests.
const bootstrap = "import os;f=os.fdopen(3,'rb');n=int(f.readline());" +
	"exec(compile(f.read(n),'<astrabox-driver>','exec'),{'__name__':'__astrabox_driver__','REQUESTS':f})"

// Args returns the argv that starts the driver with interpreter python.
func Args(python string) []string { return []string{python, "-u", "-c", bootstrap} }

// Preamble is the first thing to write to the request pipe.
func Preamble() []byte {
	return append([]byte(strconv.Itoa(len(source))+"\n"), source...)
}

// Request asks the driver to run Code as a cell, ending its output with
// Marker on fds 1 and 2.
type Request struct {
	Code   string `json:"code"`
	Marker string `json:"marker"`
}

// Encode returns r as one protocol line.
func (r Request) Encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode driver request: %w", err)
	}
	return append(b, '\n'), nil
}

// Message types sent by the driver.
const (
	TypeReady   = "ready"
	TypeStarted = "started"
	TypeResult  = "result"
	TypeError   = "error"
	TypeDone    = "done"
)

// Message is one control message from the driver.
type Message struct {
	Type string `json:"type"`
	// Python is the interpreter version (ready).
	Python string `json:"python,omitempty"`
	// Unsupported (ready), when set, says why the driver cannot serve the
	// language it was started for; it exits after this message.
	Unsupported string `json:"unsupported,omitempty"`
	// N is the cell's execution count (started).
	N int `json:"n,omitempty"`
	// Data maps MIME types to representations (result).
	Data map[string]string `json:"data,omitempty"`
	// EName, EValue and Traceback describe an exception (error).
	EName     string   `json:"ename,omitempty"`
	EValue    string   `json:"evalue,omitempty"`
	Traceback []string `json:"traceback,omitempty"`
	// Marked lists the fds (1, 2) the marker was written to (done).
	Marked []int `json:"marked,omitempty"`
}

// ErrMalformed is wrapped by Parse for a line that is not a valid message.
var ErrMalformed = errors.New("malformed driver message")

// Parse decodes and validates one control line (without its newline).
func Parse(line []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch m.Type {
	case TypeReady:
	case TypeStarted:
		if m.N <= 0 {
			return Message{}, fmt.Errorf("%w: started without a positive n", ErrMalformed)
		}
	case TypeResult:
		if len(m.Data) == 0 {
			return Message{}, fmt.Errorf("%w: result without data", ErrMalformed)
		}
	case TypeError:
		if m.EName == "" {
			return Message{}, fmt.Errorf("%w: error without ename", ErrMalformed)
		}
	case TypeDone:
		for _, fd := range m.Marked {
			if fd != 1 && fd != 2 {
				return Message{}, fmt.Errorf("%w: done marks fd %d", ErrMalformed, fd)
			}
		}
	default:
		return Message{}, fmt.Errorf("%w: unknown type %q", ErrMalformed, m.Type)
	}
	return m, nil
}

// Reader reads control messages.
type Reader struct {
	br *bufio.Reader
}

// NewReader returns a Reader of the control pipe r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next message. It returns io.EOF at the end of the pipe
// and an ErrMalformed error for a bad or over-long line (the line is
// skipped; reading may continue).
func (r *Reader) Next() (Message, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		if !tooLong && len(line)+len(chunk) > MaxMessageBytes {
			tooLong, line = true, nil
		}
		if !tooLong {
			line = append(line, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && (len(line) > 0 || tooLong):
			return Message{}, fmt.Errorf("%w: truncated line at end of pipe", ErrMalformed)
		case err != nil:
			return Message{}, err
		case tooLong:
			return Message{}, fmt.Errorf("%w: line longer than %d bytes", ErrMalformed, MaxMessageBytes)
		}
		return Parse(line[:len(line)-1])
	}
}
