package wire

// PTYFrame is a JSON text frame of the PTY WebSocket
// (GET /pty/{id}/ws), in either direction. It has the field names of the
// OpenSandbox execd frames:
//
//   - client to server: "resize" (Cols, Rows), "signal" (Signal), "ping",
//     and "stdin" (Data, plain text: a fallback for debugging tools; binary
//     PTYStdin frames are the normal way to send input);
//   - server to client: "connected" (SessionID, Mode and, an addition,
//     Offset: the output offset at which live output starts), "pong",
//     "exit" (ExitCode) and "error" (Code, Error).
type PTYFrame struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id,omitempty"`
	Mode      string `json:"mode,omitempty"`
	Data      string `json:"data,omitempty"`
	Cols      int    `json:"cols,omitempty"`
	Rows      int    `json:"rows,omitempty"`
	Signal    string `json:"signal,omitempty"`
	Offset    int64  `json:"offset,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Error     string `json:"error,omitempty"`
	Code      string `json:"code,omitempty"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// PTYFrame types.
const (
	PTYFrameConnected = "connected"
	PTYFramePong      = "pong"
	PTYFrameExit      = "exit"
	PTYFrameError     = "error"
	PTYFrameResize    = "resize"
	PTYFrameSignal    = "signal"
	PTYFramePing      = "ping"
	PTYFrameStdin     = "stdin"
)

// PTY session modes, reported in the connected frame.
const (
	PTYModePTY  = "pty"
	PTYModePipe = "pipe"
)

// Codes of PTY error frames, and the close reason of an evicted holder.
const (
	PTYErrStartFailed      = "START_FAILED"
	PTYErrStdinWriteFailed = "STDIN_WRITE_FAILED"
	PTYErrInvalidFrame     = "INVALID_FRAME"
	PTYErrTakenOver        = "TAKEN_OVER"
)

// PTYReplayHeader is the length of a PTYReplay frame's header: the channel
// byte and the big-endian int64 output offset of the frame's first byte.
const PTYReplayHeader = 1 + 8
