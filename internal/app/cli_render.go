package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/platform/wire"
)

// Bounds of what a tool call shows.
const (
	maxToolInput   = 600  // bytes of a call's input
	maxOutputBytes = 2000 // bytes of a call's output
	maxOutputLines = 20   // lines of a call's output
)

// replyView prints a Session's reply for a person as its frames arrive:
// text as it streams, reasoning dimmed (or prefixed "thinking: " when the
// output is not a terminal), each tool call with its name and input and
// then its bounded output, failures and interruptions. It writes nothing
// for control events. What it prints of a reply goes through visible: the
// only escapes it sends are its own.
type replyView struct {
	w     io.Writer
	color bool
	// midLine is set when the last write did not end a line.
	midLine bool
	// reasoning is set inside a reasoning part.
	reasoning bool
	// lastCall is the id of the last tool call shown.
	lastCall string
}

// write prints text, which may be a box's or a model's: its controls are
// shown, never sent to the terminal (visible).
func (v *replyView) write(s string) {
	v.emit(visible(s))
}

// style sends one of the view's own escape sequences (its dimming).
func (v *replyView) style(seq string) {
	v.emit(seq)
}

func (v *replyView) emit(s string) {
	if s == "" {
		return
	}
	_, _ = io.WriteString(v.w, s)
	v.midLine = !strings.HasSuffix(s, "\n")
}

// lineStart ends the current line, if one is open.
func (v *replyView) lineStart() {
	if v.midLine {
		v.write("\n")
	}
}

// line prints s on a line of its own.
func (v *replyView) line(s string) {
	v.lineStart()
	v.write(s + "\n")
}

// show prints one event.
func (v *replyView) show(e client.Event) {
	if !e.IsFrame() {
		return
	}
	ch, err := e.Chunk()
	if err != nil {
		return
	}
	switch ch.Type {
	case wire.ChunkTextStart:
		v.endReasoning()
	case wire.ChunkTextDelta:
		v.write(ch.Delta)
	case wire.ChunkReasoningStart:
		v.lineStart()
		v.reasoning = true
		if v.color {
			v.style("\x1b[2m")
		} else {
			v.write("thinking: ")
		}
	case wire.ChunkReasoningDelta:
		d := ch.Delta
		if !v.color {
			d = strings.ReplaceAll(d, "\n", "\nthinking: ")
		}
		v.write(d)
	case wire.ChunkReasoningEnd:
		v.endReasoning()
	case wire.ChunkToolInputAvailable:
		v.endReasoning()
		v.line(fmt.Sprintf("→ %s %s", ch.ToolName, bound(compactJSON(ch.Input), maxToolInput, 1)))
		v.lastCall = ch.ToolCallID
	case wire.ChunkToolOutputAvailable:
		v.line(indent("← ", bound(toolOutput(ch.Output), maxOutputBytes, maxOutputLines)))
	case wire.ChunkToolOutputError:
		v.line(indent("← error: ", bound(ch.ErrorText, maxOutputBytes, maxOutputLines)))
	case wire.ChunkToolOutputDenied:
		v.line("← denied")
	case wire.DataTurnFailure:
		var f struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ch.Data, &f)
		v.endReasoning()
		v.line(fmt.Sprintf("error: %s: %s", f.Code, f.Message))
	case wire.DataTurnInterrupted:
		v.endReasoning()
		v.line("[interrupted]")
	case wire.DataStepBroken:
		v.endReasoning()
		v.line("[the connection to the model broke off; the answer starts again]")
	case wire.DataRetry:
		var r struct {
			Attempt int    `json:"attempt"`
			Error   string `json:"error"`
		}
		_ = json.Unmarshal(ch.Data, &r)
		v.endReasoning()
		v.line(fmt.Sprintf("[the model call is made again (try %d): %s]", r.Attempt+1, bound(r.Error, 200, 1)))
	case wire.ChunkFinish:
		v.endReasoning()
		v.lineStart()
	}
}

func (v *replyView) endReasoning() {
	if !v.reasoning {
		return
	}
	v.reasoning = false
	if v.color {
		v.style("\x1b[0m")
	}
	v.lineStart()
}

// compactJSON returns raw on one line.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return unescapeHTML(b.String())
}

// unescapeHTML turns the escapes of <, > and & that Go's JSON encoder
// writes (\u003c, \u003e, \u0026) back into the characters, which read
// better in a terminal; other escapes stay as they are.
func unescapeHTML(js string) string {
	if !strings.Contains(js, `\u00`) {
		return js
	}
	var b strings.Builder
	for i := 0; i < len(js); i++ {
		if js[i] != '\\' || i+1 >= len(js) {
			b.WriteByte(js[i])
			continue
		}
		if js[i+1] == 'u' && i+6 <= len(js) {
			switch js[i+2 : i+6] {
			case "003c", "003C":
				b.WriteByte('<')
				i += 5
				continue
			case "003e", "003E":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteString(js[i : i+2]) // an escape kept whole: \\ stays \\
		i++
	}
	return b.String()
}

// toolOutput shows a command's result ({exit_code, stdout, stderr}) as its
// output streams and exit code, anything else as JSON.
func toolOutput(raw json.RawMessage) string {
	var cmd struct {
		ExitCode *int   `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		TimedOut bool   `json:"timed_out"`
	}
	if json.Unmarshal(raw, &cmd) != nil || cmd.ExitCode == nil {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return compactJSON(raw)
	}
	var b strings.Builder
	b.WriteString(cmd.Stdout)
	if cmd.Stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(cmd.Stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "(exit %d", *cmd.ExitCode)
	if cmd.TimedOut {
		b.WriteString(", timed out")
	}
	b.WriteString(")")
	return b.String()
}

// bound cuts s to maxBytes and maxLines, saying how much was left out.
func bound(s string, maxBytes, maxLines int) string {
	s = strings.TrimRight(s, "\n")
	cut := ""
	if lines := strings.Split(s, "\n"); len(lines) > maxLines {
		s = strings.Join(lines[:maxLines], "\n")
		cut = fmt.Sprintf("%d more lines", len(lines)-maxLines)
	}
	if len(s) > maxBytes {
		n := maxBytes
		for n > 0 && (s[n]&0xC0) == 0x80 { // not inside a UTF-8 sequence
			n--
		}
		cut = fmt.Sprintf("%d more bytes", len(s)-n)
		s = s[:n]
	}
	if cut != "" {
		s += " … (" + cut + ")"
	}
	return s
}

// indent prefixes s's first line with prefix and the others with as many
// spaces.
func indent(prefix, s string) string {
	pad := strings.Repeat(" ", len([]rune(prefix)))
	return prefix + strings.ReplaceAll(s, "\n", "\n"+pad)
}

// turnEnd is how a turn ended: outcome completed, interrupted or
// failed, with the failure's code and (for an input refused before its
// reply began) message.
type turnEnd struct {
	Outcome   string `json:"outcome"`
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

// replyEnd reports a turn's end: turn.ended, or input.failed for an input
// that failed outside a reply.
func replyEnd(e client.Event) (turnEnd, bool) {
	if e.Type != "turn.ended" && e.Type != "input.failed" {
		return turnEnd{}, false
	}
	var end turnEnd
	_ = json.Unmarshal(e.Payload, &end)
	if e.Type == "input.failed" {
		end.Outcome = "failed"
	}
	return end, true
}

// interactionOf returns the approval or question a data-interaction frame
// opens.
func interactionOf(e client.Event) (*client.Interaction, bool) {
	if e.Type != "data-interaction" {
		return nil, false
	}
	ch, err := e.Chunk()
	if err != nil {
		return nil, false
	}
	var ia client.Interaction
	if json.Unmarshal(ch.Data, &ia) != nil || ia.ID == "" {
		return nil, false
	}
	return &ia, true
}

// allPages returns every item of a paged list, reading pages of 200.
func allPages[T any](ctx context.Context, list func(context.Context, client.PageOptions) (client.Page[T], error)) ([]T, error) {
	var all []T
	page := client.PageOptions{Limit: 200}
	for {
		p, err := list(ctx, page)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Items...)
		if p.NextCursor == "" {
			return all, nil
		}
		page.Cursor = p.NextCursor
	}
}
