package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// toolbox runs the enabled tools in a workspace. It is safe for
// concurrent use.
type toolbox struct {
	workspace    string // absolute and clean
	shellTimeout time.Duration
	names        []string // enabled, in toolOrder
	enabled      map[string]bool
}

// newToolbox returns the tools named by names (nil: all) working in
// workspace, which must be absolute.
func newToolbox(workspace string, names []string, shellTimeout time.Duration) (*toolbox, error) {
	tb := &toolbox{workspace: filepath.Clean(workspace), shellTimeout: shellTimeout, enabled: map[string]bool{}}
	if names == nil {
		names = toolOrder
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := toolInfos[n]; !ok {
			return nil, fmt.Errorf("unknown tool %q (tools: %s)", n, strings.Join(toolOrder, ", "))
		}
		tb.enabled[n] = true
	}
	for _, n := range toolOrder {
		if tb.enabled[n] {
			tb.names = append(tb.names, n)
		}
	}
	return tb, nil
}

// needsApproval reports whether a tool asks first in permission mode ask.
func needsApproval(name string) bool {
	return name == toolShell || name == toolWriteFile || name == toolEditFile
}

// errToolInterrupted reports a tool stopped by an interrupt.
var errToolInterrupted = errors.New("interrupted by the user")

// run runs one tool call and returns its result as JSON. An error is the
// call's failure, worded for the model; a call stopped because ctx ended
// returns an error wrapping errToolInterrupted.
func (tb *toolbox) run(ctx context.Context, name, args string) (json.RawMessage, error) {
	if !tb.enabled[name] {
		return nil, fmt.Errorf("unknown tool %q; available tools: %s", name, strings.Join(tb.names, ", "))
	}
	var (
		out any
		err error
	)
	switch name {
	case toolShell:
		out, err = tb.shell(ctx, args)
	case toolReadFile:
		out, err = tb.readFile(args)
	case toolWriteFile:
		out, err = tb.writeFile(args)
	case toolEditFile:
		out, err = tb.editFile(args)
	case toolListDir:
		out, err = tb.listDir(args)
	case toolSearch:
		out, err = tb.search(ctx, args)
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode %s result: %w", name, err)
	}
	return b, nil
}

// resolve turns a tool's path argument into an absolute, clean path:
// relative paths resolve in the workspace.
func (tb *toolbox) resolve(p string) (string, error) {
	if p == "" {
		return "", errors.New("path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("path holds a NUL byte")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(tb.workspace, p)
	}
	return filepath.Clean(p), nil
}

// resolveOr is resolve with a default for an empty argument.
func (tb *toolbox) resolveOr(p, def string) (string, error) {
	if p == "" {
		p = def
	}
	return tb.resolve(p)
}

// display names p for the model: relative to the workspace when it is
// inside it, otherwise absolute.
func (tb *toolbox) display(p string) string {
	rel, err := filepath.Rel(tb.workspace, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return rel
}

// decodeArgs parses a tool call's arguments (a JSON object; empty means
// none) into v.
func decodeArgs(raw string, v any) error {
	raw = strings.TrimSpace(raw)
	if raw == "" || raw == "null" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return fmt.Errorf("invalid arguments (want a JSON object): %w", err)
	}
	return nil
}

// flexInt is an integer argument that also accepts a JSON string holding
// an integer or a number with no fraction, as models sometimes send.
type flexInt int64

func (n *flexInt) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(uq)
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		*n = flexInt(i)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != float64(int64(f)) {
		return fmt.Errorf("want an integer, got %s", b)
	}
	*n = flexInt(f)
	return nil
}

// flexBool is a boolean argument that also accepts "true" and "false" as
// strings.
type flexBool bool

func (v *flexBool) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(uq)
	}
	x, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want a boolean, got %s", b)
	}
	*v = flexBool(x)
	return nil
}

// toolErrorContent is the tool message that tells the model a call failed.
func toolErrorContent(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

// cutUTF8 returns at most n bytes of b, not splitting a UTF-8 sequence.
func cutUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	// b[n] is the first byte left out: if it continues a sequence, leave
	// out the whole sequence.
	for i := 0; i < utf8.UTFMax && n > 0 && !utf8.RuneStart(b[n]); i++ {
		n--
	}
	return b[:n]
}

// isBinary reports whether a file's first bytes look binary (hold a NUL).
func isBinary(head []byte) bool { return bytes.IndexByte(head, 0) >= 0 }

// headTail keeps the first and last limit/2 bytes written to it and counts
// the rest, so a command's output stays bounded however long it runs.
type headTail struct {
	half       int
	head, tail []byte
	total      int64
}

func newHeadTail(limit int) *headTail { return &headTail{half: limit / 2} }

func (h *headTail) Write(p []byte) (int, error) {
	h.total += int64(len(p))
	rest := p
	if room := h.half - len(h.head); room > 0 {
		n := min(room, len(rest))
		h.head = append(h.head, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) > 0 {
		h.tail = append(h.tail, rest...)
		if over := len(h.tail) - h.half; over > 0 {
			copy(h.tail, h.tail[over:])
			h.tail = h.tail[:h.half]
		}
	}
	return len(p), nil
}

// String returns the output, with a marker where bytes were left out.
func (h *headTail) String() string {
	omitted := h.total - int64(len(h.head)) - int64(len(h.tail))
	var s string
	if omitted <= 0 {
		s = string(h.head) + string(h.tail)
	} else {
		s = string(h.head) + fmt.Sprintf("\n[... %d bytes omitted ...]\n", omitted) + string(h.tail)
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
