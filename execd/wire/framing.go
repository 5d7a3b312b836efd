package wire

// Output framing of execution streams (POST /command, POST /code,
// POST /session/{id}/run, GET /command/{id}/logs with offset or follow).
//
// By default an event stream (text/event-stream) is framed as OpenSandbox's
// execd frames it, which its SDKs and test suites expect:
//
//   - one stdout or stderr event per line, without its terminator ("\n",
//     "\r" or "\r\n"); an empty line is an event whose text is "\n";
//   - a last line without a terminator is sent when the output ends;
//   - a line longer than MaxLineBytes is sent as several events of at most
//     that many bytes each, cut between UTF-8 characters;
//   - a shell command that exits non-zero ends with an error event
//     (CommandExecError, evalue = the code) and no execution_complete; the
//     error event carries the code in exit_code too, and so does
//     GET /command/status/{id}.
//
// The SSE id of every output event is the byte offset just after the bytes
// it covers (its terminator included), so Last-Event-ID and `offset` resume
// line-framed streams too.
//
// FramingBytes (addition) asks for AstraBox's byte-exact stream instead:
// output events carry the bytes as read from the pipes (cut only at
// MaxLineBytes-sized reads and between UTF-8 characters), so that their
// concatenation is the output, and a failed command's error event is
// followed by execution_complete with exit_code, so every finished stream
// ends with one. Clients that resume by byte offset and rebuild the output
// (the Go client, and through it the platform's runner) use it. The binary
// frame encoding (MediaTypeFrames) is always byte-exact.
const (
	// QueryFraming is the query parameter that selects the framing.
	QueryFraming = "framing"
	// FramingLines is OpenSandbox's framing, the default.
	FramingLines = "lines"
	// FramingBytes is AstraBox's byte-exact framing.
	FramingBytes = "bytes"
)

// MaxLineBytes bounds the text of one line-framed output event.
const MaxLineBytes = 64 << 10
