// Package wire holds the JSON shapes of the execd HTTP API, shared by the
// daemon and its Go client. Field names follow the OpenSandbox execd
// specification; fields it does not define are AstraBox additions and are
// marked so.
package wire

import "time"

// Headers used by execd.
const (
	HeaderAccessToken = "X-EXECD-ACCESS-TOKEN"
	// HeaderTailCursor carries the offset to pass as the next `cursor` of
	// GET /command/{id}/logs.
	HeaderTailCursor = "EXECD-COMMANDS-TAIL-CURSOR"
	// HeaderOutputLost (addition) counts bytes between the requested cursor
	// and the returned output that the ring no longer held.
	HeaderOutputLost = "EXECD-OUTPUT-LOST"
)

// DefaultPort is the TCP port execd listens on inside a box.
const DefaultPort = 44772

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Event types of execution streams.
const (
	EventInit      = "init"
	EventStatus    = "status"
	EventError     = "error"
	EventStdout    = "stdout"
	EventStderr    = "stderr"
	EventResult    = "result"
	EventComplete  = "execution_complete"
	EventCount     = "execution_count"
	EventPing      = "ping"
	CommandErrName = "CommandExecError"
)

// Event is one frame of an execution stream (the `data:` of an SSE frame;
// the frame's `event:` repeats Type, and its `id:` is the resume offset for
// output events).
type Event struct {
	Type           string         `json:"type"`
	Text           string         `json:"text,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	ExecutionTime  int64          `json:"execution_time,omitempty"`
	Timestamp      int64          `json:"timestamp"`
	Results        map[string]any `json:"results,omitempty"`
	Error          *ExecError     `json:"error,omitempty"`
	// ExitCode (addition) is the exit code of a finished shell command: on
	// execution_complete, and on the error event of a non-zero exit (which,
	// in OpenSandbox's framing, is the stream's last event; see FramingLines).
	ExitCode *int `json:"exit_code,omitempty"`
	// Lost (addition) on a status event counts output bytes that were no
	// longer retained when the stream was replayed.
	Lost int64 `json:"lost,omitempty"`
}

// ExecError describes a failed execution.
type ExecError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// EnvAstraboxBin (addition) names the environment variable that holds the
// absolute path of execd's own executable, the astrabox binary, so that a
// program in the box can run `"$ASTRABOX_BIN" agent`. execd sets it in the
// environment of every process it starts (commands, sessions, terminals,
// code contexts) to a path that names its running executable in the box's
// file system, resolved once when execd starts serving: a value execd
// inherited is kept if it names that file (a backend may pass the path),
// else execd's own path, else /.astrabox/astrabox where the backends bind
// the binary. When no path names it, the variable is left unset.
const EnvAstraboxBin = "ASTRABOX_BIN"

// RunCommandRequest is the body of POST /command.
//
// The command's environment is execd's base environment, with
// EnvAstraboxBin (ASTRABOX_BIN) set to execd's executable, and Envs applied
// on top: a request that sets ASTRABOX_BIN in Envs gets its own value.
type RunCommandRequest struct {
	Command    string            `json:"command"`
	Cwd        string            `json:"cwd,omitempty"`
	Background bool              `json:"background,omitempty"`
	Timeout    int64             `json:"timeout,omitempty"` // milliseconds
	UID        *uint32           `json:"uid,omitempty"`
	GID        *uint32           `json:"gid,omitempty"`
	Envs       map[string]string `json:"envs,omitempty"`
	// Stdin (addition) keeps a pipe to the command's stdin open for
	// POST /command/{id}/stdin; otherwise stdin is /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// KillOnDisconnect (addition) ties a foreground command to its request:
	// it is killed when the client goes away. By default it keeps running
	// and its output stays retrievable by id.
	KillOnDisconnect bool `json:"kill_on_disconnect,omitempty"`
	// PrivateStdio (addition) gives the command connected sockets instead
	// of pipes as its stdin, stdout and stderr: another process of the box
	// cannot open them again through /proc/<pid>/fd (opening a socket
	// there fails), as it can a pipe, so only the command writes its
	// output. For a long-lived program whose output is a protocol (an
	// agent program); a command that opens /dev/stdin or /dev/stdout
	// itself cannot use it.
	PrivateStdio bool `json:"private_stdio,omitempty"`
}

// CommandStatus is the body of GET /command/status/{id}.
type CommandStatus struct {
	ID         string     `json:"id"`
	Content    string     `json:"content"`
	Running    bool       `json:"running"`
	ExitCode   *int       `json:"exit_code"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Background, OutputBytes and OutputDropped are additions.
	Background  bool  `json:"background"`
	OutputBytes int64 `json:"output_bytes"`
	// OutputDropped is how many of the output's bytes are no longer
	// retained (the per-stream limit, or execd's total).
	OutputDropped int64 `json:"output_dropped"`
}

// ServerStatus (addition) is the body of GET /status: what execd is busy
// with, for a server deciding whether a box is idle, and the output
// retention it sized at start from the box's memory limit.
type ServerStatus struct {
	RunningCommands int `json:"running_commands"`
	// OutputTotal and OutputLimit bound the output retained by all
	// commands together and per stream of one command.
	OutputTotal int64 `json:"output_total_bytes"`
	OutputLimit int64 `json:"output_limit_bytes"`
	// OutputRetained is what all commands retain now.
	OutputRetained int64 `json:"output_retained_bytes"`
	// MemoryLimit is the box's memory limit that sized the retention
	// (absent: none applies).
	MemoryLimit int64 `json:"memory_limit_bytes,omitempty"`
}

// SignalRequest (addition) is the body of POST /command/{id}/signal.
type SignalRequest struct {
	Signal string `json:"signal"` // "SIGTERM", "TERM" or a number
}

// CreateSessionRequest is the body of POST /session.
type CreateSessionRequest struct {
	Cwd string `json:"cwd,omitempty"`
}

// CreateSessionResponse answers POST /session.
type CreateSessionResponse struct {
	SessionID string `json:"session_id"`
}

// RunInSessionRequest is the body of POST /session/{id}/run.
type RunInSessionRequest struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd,omitempty"`
	Timeout int64  `json:"timeout,omitempty"` // milliseconds
}

// CodeContext identifies a code interpreter context.
type CodeContext struct {
	ID       string `json:"id,omitempty"`
	Language string `json:"language"`
	Cwd      string `json:"cwd,omitempty"`
}

// RunCodeRequest is the body of POST /code.
type RunCodeRequest struct {
	Context CodeContext `json:"context"`
	Code    string      `json:"code"`
}

// FileInfo describes one file.
type FileInfo struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"` // file, directory, symlink, other
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	CreatedAt  time.Time `json:"created_at"`
	Owner      string    `json:"owner"`
	Group      string    `json:"group"`
	Mode       int       `json:"mode"` // octal digits as a decimal number: 755
}

// Permission sets mode and, optionally, owner and group.
type Permission struct {
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	Mode  int    `json:"mode"`
}

// FileMetadata is the JSON part that precedes each file part of an upload.
type FileMetadata struct {
	Path  string `json:"path"`
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	Mode  int    `json:"mode,omitempty"`
	// Size and SHA256 (additions) are verified against what was written
	// before the upload is reported successful.
	Size   *int64 `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// RenameItem moves Src to Dest.
type RenameItem struct {
	Src  string `json:"src"`
	Dest string `json:"dest"`
}

// ReplaceItem replaces every Old with New in a file.
type ReplaceItem struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// ReplaceResult is the per-file answer of POST /files/replace?verbose=true.
type ReplaceResult struct {
	ReplacedCount int `json:"replacedCount"`
}

// Metrics is the body of GET /metrics and the data of /metrics/watch.
type Metrics struct {
	CPUCount    float64 `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotalMiB float64 `json:"mem_total_mib"`
	MemUsedMiB  float64 `json:"mem_used_mib"`
	Timestamp   int64   `json:"timestamp"`
}

// CreatePTYRequest is the body of POST /pty.
type CreatePTYRequest struct {
	Cwd     string            `json:"cwd,omitempty"`
	Command string            `json:"command,omitempty"` // default: the shell
	Envs    map[string]string `json:"envs,omitempty"`
}

// CreatePTYResponse answers POST /pty.
type CreatePTYResponse struct {
	SessionID string `json:"session_id"`
}

// PTYStatus is the body of GET /pty/{id}.
type PTYStatus struct {
	SessionID    string `json:"session_id"`
	Running      bool   `json:"running"`
	Attached     bool   `json:"attached"`
	OutputOffset int64  `json:"output_offset"`
	ExitCode     *int   `json:"exit_code,omitempty"`
}

// PTY WebSocket channel bytes: the first byte of every binary frame.
const (
	PTYStdin  byte = 0x00 // client to server
	PTYStdout byte = 0x01
	PTYStderr byte = 0x02 // pipe mode only
	PTYReplay byte = 0x03 // followed by an 8-byte big-endian offset
)

// PTY WebSocket close code for a holder evicted by takeover.
const PTYCloseTakenOver = 4001
