package client

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// ptyReadLimit bounds one frame received from execd.
const ptyReadLimit = 16 << 20

// CreatePTY registers a PTY session and returns its id. Its process starts
// on the first AttachPTY.
func (c *Client) CreatePTY(ctx context.Context, req wire.CreatePTYRequest) (string, error) {
	var resp wire.CreatePTYResponse
	if err := c.doJSON(ctx, http.MethodPost, "/pty", nil, req, &resp); err != nil {
		return "", err
	}
	return resp.SessionID, nil
}

// PTYStatus returns a PTY session's status; OutputOffset is the offset to
// pass as AttachOptions.Since to attach without replay.
func (c *Client) PTYStatus(ctx context.Context, id string) (wire.PTYStatus, error) {
	var st wire.PTYStatus
	err := c.doJSON(ctx, http.MethodGet, "/pty/"+url.PathEscape(id), nil, nil, &st)
	return st, err
}

// DeletePTY kills a PTY session's processes and frees it; it returns once
// they are gone.
func (c *Client) DeletePTY(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/pty/"+url.PathEscape(id), nil, nil, nil)
}

// AttachOptions are the options of AttachPTY.
type AttachOptions struct {
	// Pipe starts the process with pipes instead of a terminal (stdout and
	// stderr apart). It only matters on the attach that starts the process.
	Pipe bool
	// Since replays retained output from this offset before live output.
	// nil leaves the server's default, which is to replay everything
	// retained; pass the status's OutputOffset to skip the replay.
	Since *int64
	// Takeover evicts a client already attached (its connection is closed
	// with code wire.PTYCloseTakenOver) instead of failing with CONFLICT.
	Takeover bool
	// Cols and Rows size the terminal (0: leave it; 80x24 at start).
	Cols, Rows int
}

// AttachPTY opens the session's WebSocket. ctx bounds the handshake only.
// Errors before the upgrade are *APIError: SESSION_NOT_FOUND, or CONFLICT
// when another client is attached (a reattach right after Close can meet
// it briefly, while execd finishes the old connection: retry, or use
// Takeover). The caller closes the returned PTYConn.
func (c *Client) AttachPTY(ctx context.Context, id string, opts AttachOptions) (*PTYConn, error) {
	q := url.Values{}
	if opts.Pipe {
		q.Set("pty", "0")
	}
	if opts.Since != nil {
		q.Set("since", strconv.FormatInt(*opts.Since, 10))
	}
	if opts.Takeover {
		q.Set("takeover", "1")
	}
	if opts.Cols > 0 && opts.Rows > 0 {
		q.Set("cols", strconv.Itoa(opts.Cols))
		q.Set("rows", strconv.Itoa(opts.Rows))
	}
	path := "/pty/" + url.PathEscape(id) + "/ws"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	conn, err := c.dialWebSocket(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(ptyReadLimit)
	return &PTYConn{conn: conn}, nil
}

// dialWebSocket opens a WebSocket to pathQuery (path and query, already
// escaped) through the client's HTTP client, with the access token. opts
// may be nil; its HTTPClient is replaced. A refused handshake with an execd
// error body is an *APIError.
func (c *Client) dialWebSocket(ctx context.Context, pathQuery string, opts *websocket.DialOptions) (*websocket.Conn, error) {
	var o websocket.DialOptions
	if opts != nil {
		o = *opts
	}
	o.HTTPClient = c.hc
	o.HTTPHeader = o.HTTPHeader.Clone()
	if o.HTTPHeader == nil {
		o.HTTPHeader = http.Header{}
	}
	c.setAuth(o.HTTPHeader)
	conn, resp, err := websocket.Dial(ctx, c.base+pathQuery, &o)
	if err == nil {
		return conn, nil
	}
	if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		var er wire.ErrorResponse
		if json.Unmarshal(body, &er) == nil && er.Code != "" {
			return nil, &APIError{Status: resp.StatusCode, Code: sandbox.Code(er.Code), Message: er.Message}
		}
	}
	return nil, fmt.Errorf("websocket %s: %w", pathQuery, err)
}

// PTYFrame is one frame received on a PTY WebSocket: output, or a control
// frame.
type PTYFrame struct {
	// Channel is wire.PTYStdout, wire.PTYStderr (pipe mode) or
	// wire.PTYReplay for output; 0 for a control frame.
	Channel byte
	// Offset is the output offset of Data[0]: from the header of a replay
	// frame, otherwise tracked from the connected frame and the frames
	// since.
	Offset int64
	Data   []byte
	// Control is set for a JSON frame: connected, pong, exit, error.
	Control *wire.PTYFrame
}

// PTYClosedError is returned by Next when execd closed the connection with
// a status other than normal closure.
type PTYClosedError struct {
	Code   int
	Reason string
}

func (e *PTYClosedError) Error() string {
	return fmt.Sprintf("pty connection closed: code %d %s", e.Code, e.Reason)
}

// ErrPTYTakenOver matches (errors.Is) the PTYClosedError of a client that
// another client took over.
var ErrPTYTakenOver = errors.New("pty session taken over by another client")

// Is makes errors.Is(err, ErrPTYTakenOver) true for the takeover close.
func (e *PTYClosedError) Is(target error) bool {
	return target == ErrPTYTakenOver && e.Code == wire.PTYCloseTakenOver
}

// PTYConn is an attached PTY WebSocket. Next must be called from one
// goroutine at a time; Write, Resize, Signal, Ping and Close may be called
// concurrently with it and with each other.
type PTYConn struct {
	conn *websocket.Conn
	pos  int64 // offset of the next live output byte (Next's goroutine only)
}

// Next returns the next frame. ctx bounds the wait; when it ends the
// connection is closed. After the exit frame, Next returns io.EOF once
// execd closes normally; other closes are *PTYClosedError.
func (p *PTYConn) Next(ctx context.Context) (PTYFrame, error) {
	typ, data, err := p.conn.Read(ctx)
	if err != nil {
		var ce websocket.CloseError
		switch {
		case errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure:
			return PTYFrame{}, io.EOF
		case errors.As(err, &ce):
			return PTYFrame{}, &PTYClosedError{Code: int(ce.Code), Reason: ce.Reason}
		}
		return PTYFrame{}, fmt.Errorf("read pty frame: %w", err)
	}
	if typ == websocket.MessageText {
		var fr wire.PTYFrame
		if err := json.Unmarshal(data, &fr); err != nil {
			return PTYFrame{}, fmt.Errorf("decode pty control frame: %w", err)
		}
		if fr.Type == wire.PTYFrameConnected {
			p.pos = fr.Offset
		}
		return PTYFrame{Control: &fr}, nil
	}
	if len(data) == 0 {
		return PTYFrame{}, errors.New("read pty frame: empty binary frame")
	}
	f := PTYFrame{Channel: data[0], Data: data[1:]}
	if f.Channel == wire.PTYReplay {
		if len(data) < wire.PTYReplayHeader {
			return PTYFrame{}, errors.New("read pty frame: short replay header")
		}
		f.Offset = int64(binary.BigEndian.Uint64(data[1:wire.PTYReplayHeader]))
		f.Data = data[wire.PTYReplayHeader:]
	} else {
		f.Offset = p.pos
	}
	p.pos = f.Offset + int64(len(f.Data))
	return f, nil
}

// Offset is the output offset after the last output frame Next returned:
// the Since to reattach with to miss nothing.
func (p *PTYConn) Offset() int64 { return p.pos }

// Write sends b as stdin. It implements io.Writer; Close unblocks it.
func (p *PTYConn) Write(b []byte) (int, error) {
	frame := make([]byte, 1+len(b))
	frame[0] = wire.PTYStdin
	copy(frame[1:], b)
	if err := p.conn.Write(context.Background(), websocket.MessageBinary, frame); err != nil {
		return 0, fmt.Errorf("write pty stdin: %w", err)
	}
	return len(b), nil
}

// Resize sets the terminal size. For this and the other control methods,
// ctx bounds the write, and the connection is closed when it ends first.
func (p *PTYConn) Resize(ctx context.Context, cols, rows int) error {
	return p.control(ctx, wire.PTYFrame{Type: wire.PTYFrameResize, Cols: cols, Rows: rows})
}

// Signal sends a signal ("SIGINT", "TERM", "9") to the terminal's
// foreground job (the process group of the process in pipe mode).
func (p *PTYConn) Signal(ctx context.Context, signal string) error {
	return p.control(ctx, wire.PTYFrame{Type: wire.PTYFrameSignal, Signal: signal})
}

// Ping asks execd for a pong control frame, which Next returns.
func (p *PTYConn) Ping(ctx context.Context) error {
	return p.control(ctx, wire.PTYFrame{Type: wire.PTYFramePing})
}

func (p *PTYConn) control(ctx context.Context, fr wire.PTYFrame) error {
	b, err := json.Marshal(fr)
	if err != nil {
		return fmt.Errorf("encode pty %s frame: %w", fr.Type, err)
	}
	if err := p.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("send pty %s frame: %w", fr.Type, err)
	}
	return nil
}

// Close detaches from the session, which keeps running. It performs the
// close handshake (bounded by a few seconds) and is idempotent.
func (p *PTYConn) Close() error {
	err := p.conn.Close(websocket.StatusNormalClosure, "")
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("close pty connection: %w", err)
	}
	return nil
}
