package execd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

const (
	// ptyFrameBytes bounds the payload of one output frame.
	ptyFrameBytes = 64 << 10
	// ptyMaxClientFrame bounds one frame from the client (a paste).
	ptyMaxClientFrame = 1 << 20
	// ptyWriteTimeout bounds the write of one frame; a client that takes
	// longer is disconnected (while attached, it holds back the process's
	// output).
	ptyWriteTimeout = 10 * time.Second
	// ptyPingInterval is how often an attached client is pinged; one that
	// does not answer within the interval is disconnected.
	ptyPingInterval = 30 * time.Second
)

// errPTYEvicted ends an attach whose session was taken over.
var errPTYEvicted = errors.New("taken over by another client")

func (s *Server) registerPTY() {
	s.ptys = newPTYTable(&s.cfg, s.log)
	s.mux.HandleFunc("POST /pty", s.handleCreatePTY)
	s.mux.HandleFunc("GET /pty/{id}", s.handlePTYStatus)
	s.mux.HandleFunc("DELETE /pty/{id}", s.handleDeletePTY)
	s.mux.HandleFunc("GET /pty/{id}/ws", s.handlePTYSocket)
}

// closePTYs kills every PTY session and waits for their processes.
func (s *Server) closePTYs() { s.ptys.closeAll() }

// handleCreatePTY registers a session (201); its process starts on the
// first attach. The body is optional.
func (s *Server) handleCreatePTY(w http.ResponseWriter, r *http.Request) {
	var req wire.CreatePTYRequest
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, true); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.ptys.create(req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, wire.CreatePTYResponse{SessionID: p.id})
}

func (s *Server) handlePTYStatus(w http.ResponseWriter, r *http.Request) {
	p, err := s.ptys.get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p.status())
}

// handleDeletePTY kills the session's processes, waits for them, and frees
// the session.
func (s *Server) handleDeletePTY(w http.ResponseWriter, r *http.Request) {
	if err := s.ptys.remove(r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// ptyAttachOptions are the query parameters of GET /pty/{id}/ws.
type ptyAttachOptions struct {
	pipe       bool  // pty=0
	since      int64 // replay from this output offset (default 0: all retained)
	takeover   bool  // takeover=1
	cols, rows uint16
}

func parsePTYAttach(r *http.Request) (ptyAttachOptions, error) {
	var o ptyAttachOptions
	var err error
	if r.URL.Query().Has("pty") {
		tty, err := queryBool(r, "pty")
		if err != nil {
			return o, err
		}
		o.pipe = !tty
	}
	if o.since, err = queryInt64(r, "since", 0); err != nil {
		return o, err
	}
	if o.takeover, err = queryBool(r, "takeover"); err != nil {
		return o, err
	}
	for _, d := range []struct {
		name string
		v    *uint16
	}{{"cols", &o.cols}, {"rows", &o.rows}} {
		n, err := queryInt64(r, d.name, 0)
		if err != nil {
			return o, err
		}
		if n > 65535 {
			return o, sandbox.Errorf(sandbox.CodeInvalidRequest, "query parameter %s must be at most 65535", d.name)
		}
		*d.v = uint16(n)
	}
	return o, nil
}

// handlePTYSocket attaches a WebSocket client to a session: 404 for an
// unknown session, 409 when another client is attached (unless
// takeover=1, which evicts it with close code 4001 once this handshake has
// succeeded). It starts the process if needed, replays retained output from
// `since` as PTYReplay frames, sends the connected frame, then streams live
// output and takes input until the process exits (exit frame, then close),
// the client leaves, or another client takes over.
func (s *Server) handlePTYSocket(w http.ResponseWriter, r *http.Request) {
	p, err := s.ptys.get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	opts, err := parsePTYAttach(r)
	if err != nil {
		writeError(w, err)
		return
	}
	h := &ptyHolder{evicted: make(chan struct{})}
	if !opts.takeover {
		if err := p.attach(h, false); err != nil {
			writeError(w, err)
			return
		}
	}
	// Origins are not checked: execd is reached through an authenticated
	// channel (the access token header, which browsers cannot set on a
	// cross-site WebSocket) and behind the server's proxy, whose host differs.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		p.detach(h)
		s.log.Debug("pty websocket handshake failed", "session_id", p.id, "err", err)
		return
	}
	conn.SetReadLimit(ptyMaxClientFrame)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	a := &ptyAttachment{s: s, p: p, h: h, conn: conn, ctx: ctx, cancel: cancel}
	if opts.takeover {
		if err := p.attach(h, true); err != nil {
			a.fail(string(sandbox.CodeOf(err)), err)
			return
		}
	}
	defer p.detach(h)
	if err := p.start(opts.pipe, opts.cols, opts.rows); err != nil {
		a.fail(wire.PTYErrStartFailed, err)
		return
	}
	if opts.cols > 0 && opts.rows > 0 {
		if err := p.resize(opts.cols, opts.rows); err != nil {
			s.log.Debug("pty resize", "session_id", p.id, "err", err)
		}
	}
	s.log.Debug("pty attached", "session_id", p.id, "takeover", opts.takeover, "since", opts.since)
	a.serve(opts.since)
}

// ptyAttachment is one attached WebSocket client.
type ptyAttachment struct {
	s      *Server
	p      *ptySession
	h      *ptyHolder
	conn   *websocket.Conn
	ctx    context.Context // ends when the client is gone
	cancel context.CancelFunc
}

// fail sends an error frame and closes the connection with an internal
// error status.
func (a *ptyAttachment) fail(code string, err error) {
	_ = a.writeJSON(wire.PTYFrame{Type: wire.PTYFrameError, Code: code, Error: sandbox.MessageOf(err)})
	_ = a.conn.Close(websocket.StatusInternalError, code)
}

// serve runs the attachment until it ends and closes the connection.
func (a *ptyAttachment) serve(since int64) {
	var wg sync.WaitGroup
	wg.Go(a.readLoop)
	wg.Go(a.pingLoop)
	defer wg.Wait()
	defer a.cancel()

	// The follower keeps the bytes this client has not been sent yet from
	// being dropped; while it lags, the process's output is held back.
	f := a.p.out.Follow(since)
	defer f.Detach()
	live := a.p.out.End()
	err := a.replay(since, live, f)
	if err == nil {
		err = a.writeJSON(wire.PTYFrame{Type: wire.PTYFrameConnected, SessionID: a.p.id, Mode: a.p.mode(), Offset: live})
	}
	if err == nil {
		err = a.follow(live, f)
	}
	switch {
	case err == nil:
		code := a.p.exitStatus()
		if a.writeJSON(wire.PTYFrame{Type: wire.PTYFrameExit, ExitCode: &code}) == nil {
			_ = a.conn.Close(websocket.StatusNormalClosure, "process exited")
		}
	case errors.Is(err, errPTYEvicted):
		_ = a.conn.Close(wire.PTYCloseTakenOver, wire.PTYErrTakenOver)
	}
	_ = a.conn.CloseNow()
}

// replay sends the retained output in [from, to) as PTYReplay frames, each
// a contiguous run of at most ptyFrameBytes.
func (a *ptyAttachment) replay(from, to int64, f *outlog.Follower) error {
	var frame []byte
	var next int64 // offset after frame's last byte
	flush := func() error {
		if len(frame) == 0 {
			return nil
		}
		err := a.writeBinary(frame)
		frame = nil
		f.Advance(next)
		return err
	}
	for pos := from; pos < to; {
		res := a.p.out.Read(pos, ptyFrameBytes)
		for _, pc := range res.Pieces {
			if pc.Offset >= to {
				break
			}
			data := pc.Data[:min(int64(len(pc.Data)), to-pc.Offset)]
			if len(frame) > 0 && (pc.Offset != next || len(frame)+len(data) > wire.PTYReplayHeader+ptyFrameBytes) {
				if err := flush(); err != nil {
					return err
				}
			}
			if len(frame) == 0 {
				frame = ptyReplayHeader(pc.Offset, len(data))
			}
			frame = append(frame, data...)
			next = pc.Offset + int64(len(data))
		}
		if res.Next <= pos {
			break
		}
		pos = res.Next
	}
	return flush()
}

func ptyReplayHeader(off int64, n int) []byte {
	b := make([]byte, wire.PTYReplayHeader, wire.PTYReplayHeader+n)
	b[0] = wire.PTYReplay
	binary.BigEndian.PutUint64(b[1:], uint64(off))
	return b
}

// follow sends output from pos as it arrives until the log is complete
// (nil), the holder is evicted (errPTYEvicted), or the client is gone.
// Output that does not continue where the previous frame ended is sent as a
// PTYReplay frame, whose header carries its offset.
func (a *ptyAttachment) follow(pos int64, f *outlog.Follower) error {
	sent := pos
	for {
		select {
		case <-a.h.evicted:
			return errPTYEvicted
		default:
		}
		changed := a.p.out.Changed()
		res := a.p.out.Read(pos, ptyFrameBytes)
		for _, pc := range res.Pieces {
			var frame []byte
			if pc.Offset != sent {
				frame = ptyReplayHeader(pc.Offset, len(pc.Data))
			} else {
				ch := wire.PTYStdout
				if pc.Stream == outlog.Stderr {
					ch = wire.PTYStderr
				}
				frame = append(make([]byte, 0, 1+len(pc.Data)), ch)
			}
			if err := a.writeBinary(append(frame, pc.Data...)); err != nil {
				return err
			}
			sent = pc.Offset + int64(len(pc.Data))
		}
		pos = res.Next
		f.Advance(pos)
		if res.Done {
			return nil
		}
		if len(res.Pieces) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-a.h.evicted:
			return errPTYEvicted
		case <-a.ctx.Done():
			return a.ctx.Err()
		}
	}
}

// readLoop handles the client's frames until the connection ends. Input
// from a client that was taken over is dropped.
func (a *ptyAttachment) readLoop() {
	defer a.cancel()
	defer a.p.detach(a.h)
	for {
		typ, data, err := a.conn.Read(a.ctx)
		if err != nil {
			return
		}
		if !a.p.holds(a.h) {
			continue
		}
		switch typ {
		case websocket.MessageBinary:
			if len(data) == 0 || data[0] != wire.PTYStdin {
				a.sendError(wire.PTYErrInvalidFrame, "a binary frame from the client must start with the stdin channel byte 0x00")
				continue
			}
			a.stdin(data[1:])
		case websocket.MessageText:
			a.control(data)
		}
	}
}

func (a *ptyAttachment) stdin(b []byte) {
	if len(b) == 0 {
		return
	}
	if err := a.p.writeStdin(b); err != nil {
		a.sendError(wire.PTYErrStdinWriteFailed, sandbox.MessageOf(err))
	}
}

// control handles one JSON text frame from the client.
func (a *ptyAttachment) control(data []byte) {
	var fr wire.PTYFrame
	if err := json.Unmarshal(data, &fr); err != nil {
		a.sendError(wire.PTYErrInvalidFrame, "text frames must be JSON objects: "+err.Error())
		return
	}
	switch fr.Type {
	case wire.PTYFrameStdin:
		a.stdin([]byte(fr.Data))
	case wire.PTYFrameResize:
		if fr.Cols <= 0 || fr.Rows <= 0 || fr.Cols > 65535 || fr.Rows > 65535 {
			a.sendError(wire.PTYErrInvalidFrame, "resize needs cols and rows between 1 and 65535")
			return
		}
		if err := a.p.resize(uint16(fr.Cols), uint16(fr.Rows)); err != nil {
			a.sendError(string(sandbox.CodeRuntime), err.Error())
		}
	case wire.PTYFrameSignal:
		sig, err := parseSignal(fr.Signal)
		if err != nil {
			a.sendError(wire.PTYErrInvalidFrame, sandbox.MessageOf(err))
			return
		}
		a.p.signal(sig)
	case wire.PTYFramePing:
		_ = a.writeJSON(wire.PTYFrame{Type: wire.PTYFramePong, Timestamp: nowMillis()})
	default:
		a.sendError(wire.PTYErrInvalidFrame, "unknown frame type "+strconv.Quote(fr.Type))
	}
}

func (a *ptyAttachment) sendError(code, msg string) {
	_ = a.writeJSON(wire.PTYFrame{Type: wire.PTYFrameError, Code: code, Error: msg})
}

// pingLoop pings the client periodically and drops it when it does not
// answer in time.
func (a *ptyAttachment) pingLoop() {
	t := time.NewTicker(ptyPingInterval)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(a.ctx, ptyPingInterval)
		err := a.conn.Ping(ctx)
		cancel()
		if err != nil {
			a.cancel()
			return
		}
	}
}

func (a *ptyAttachment) writeBinary(b []byte) error {
	ctx, cancel := context.WithTimeout(a.ctx, ptyWriteTimeout)
	defer cancel()
	return a.conn.Write(ctx, websocket.MessageBinary, b)
}

func (a *ptyAttachment) writeJSON(fr wire.PTYFrame) error {
	b, err := json.Marshal(fr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(a.ctx, ptyWriteTimeout)
	defer cancel()
	return a.conn.Write(ctx, websocket.MessageText, b)
}
