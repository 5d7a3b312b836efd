package wire

import "strings"

// UIMessage is an AI SDK UI message folded from a Session's log: a user
// message per input (its ID is the input id) and an assistant message per
// reply (its ID is the messageId of the reply's start chunk). Parts are
// the AI SDK's UI message parts, as JSON objects.
type UIMessage struct {
	ID       string           `json:"id"`
	Role     string           `json:"role"`
	Metadata map[string]any   `json:"metadata,omitempty"`
	Parts    []map[string]any `json:"parts"`
}

// Text returns the message's text parts joined.
func (m UIMessage) Text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p["type"] == "text" {
			s, _ := p["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// Transcript is a page of a Session's conversation, the answer of GET
// /api/v1/sessions/{id}/messages: the messages folded from the log
// entries FirstSeq to LastSeq (both 0 when there are none). When FirstSeq
// is over 1, earlier messages are on the page before it (before_seq =
// FirstSeq); a reply longer than a page has its message, the same ID, on
// each page it spans.
type Transcript struct {
	Messages []UIMessage `json:"messages"`
	FirstSeq int64       `json:"first_seq"`
	LastSeq  int64       `json:"last_seq"`
}
