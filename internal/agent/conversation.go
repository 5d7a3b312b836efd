package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Record types of the conversation file.
const (
	recordMeta     = "meta"
	recordMessage  = "message"
	recordConsumed = "consumed"
)

// record is one line of the conversation file.
type record struct {
	Type           string   `json:"type"`
	ConversationID string   `json:"conversation_id,omitempty"`
	CreatedAt      string   `json:"created_at,omitempty"`
	InputID        string   `json:"input_id,omitempty"`
	Message        *message `json:"message,omitempty"`
}

// conversation is the append-only conversation file and what it held
// when it was opened. It is not safe for concurrent use.
type conversation struct {
	f    *os.File
	size int64
	// loaded is the size of the complete records read at open.
	loaded int64

	id string
	// resumed is true when the file already held a conversation.
	resumed bool
	// messages are the messages read back, in order, with the input each
	// belongs to.
	messages []message
	inputOf  []string
	// consumed lists the inputs recorded as consumed, in order.
	consumed []string
}

// openConversation opens (creating if needed) the conversation file at
// path and reads it back. A last line cut off by a crash (no LF) is
// dropped from the file; a complete line that does not parse is skipped
// with a warning. A file without a meta record gets one appended.
func openConversation(path string, log *slog.Logger) (*conversation, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state file: %w", err)
	}
	c := &conversation{f: f}
	if err := c.load(log); err != nil {
		f.Close()
		return nil, err
	}
	if c.id == "" {
		c.id = newID("conv")
		if err := c.append(record{Type: recordMeta, ConversationID: c.id, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}); err != nil {
			f.Close()
			return nil, err
		}
	}
	return c, nil
}

// load reads every complete record and leaves the file offset at the end
// of the last one.
func (c *conversation) load(log *slog.Logger) error {
	consumed := map[string]bool{}
	br := bufio.NewReader(c.f)
	var off int64
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read state file: %w", err)
		}
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				log.Warn("dropping a cut-off last line of the state file", "line", n, "bytes", len(line))
			}
			break
		}
		off += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			log.Warn("skipping a state file line that does not parse", "line", n, "err", err)
			continue
		}
		switch r.Type {
		case recordMeta:
			if c.id == "" {
				c.id, c.resumed = r.ConversationID, r.ConversationID != ""
			}
		case recordMessage:
			if r.Message == nil {
				continue
			}
			c.messages = append(c.messages, *r.Message)
			c.inputOf = append(c.inputOf, r.InputID)
		case recordConsumed:
			if r.InputID != "" && !consumed[r.InputID] {
				consumed[r.InputID] = true
				c.consumed = append(c.consumed, r.InputID)
			}
		}
	}
	if err := c.f.Truncate(off); err != nil {
		return fmt.Errorf("trim state file: %w", err)
	}
	if _, err := c.f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("seek state file: %w", err)
	}
	c.size, c.loaded = off, off
	return nil
}

// append writes recs in one write and fsyncs the file.
func (c *conversation) append(recs ...record) error {
	var buf bytes.Buffer
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode state record: %w", err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	n, err := c.f.Write(buf.Bytes())
	c.size += int64(n)
	if err != nil {
		return fmt.Errorf("append to state file: %w", err)
	}
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("sync state file: %w", err)
	}
	return nil
}

func (c *conversation) close() error { return c.f.Close() }

// Notes that close a reply the agent could not finish, so the history the
// model receives stays valid.
const (
	noteCutOff      = "(This reply was cut off: the agent stopped before it finished.)"
	noteInterrupted = "(Interrupted by the user.)"
	noteToolCutOff  = "not run: the agent stopped before this tool call finished"
)

// repair returns the records that make a read-back history valid for the
// model: a tool result for every tool call that has none, and an assistant
// note after a user input or tool results that no reply followed.
func repair(messages []message, inputOf []string) []record {
	var fix []record
	add := func(input string, m message) {
		fix = append(fix, record{Type: recordMessage, InputID: input, Message: &m})
	}
	for i := 0; i < len(messages); i++ {
		m := messages[i]
		if m.Role != roleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		answered := map[string]bool{}
		j := i + 1
		for ; j < len(messages) && messages[j].Role == roleTool; j++ {
			answered[messages[j].ToolCallID] = true
		}
		if j < len(messages) {
			continue // only the end of the history can be cut off
		}
		for _, tc := range m.ToolCalls {
			if !answered[tc.ID] {
				add(inputOf[i], message{Role: roleTool, ToolCallID: tc.ID, Content: toolErrorContent(noteToolCutOff)})
			}
		}
	}
	if n := len(messages); n > 0 {
		last := messages[n-1]
		if last.Role == roleUser || last.Role == roleTool || len(fix) > 0 {
			add(inputOf[n-1], message{Role: roleAssistant, Content: noteCutOff})
		}
	}
	return fix
}
