package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store"
)

// longSession records Session id with a log of turns replies of deltas
// text deltas each, and returns its id and log.
func longSession(t *testing.T, e *env, id string, turns, deltas int) (string, []store.LogEntry) {
	t.Helper()
	ctx := ctxT(t)
	st := e.svc.Store()
	s := &store.Session{ID: id, AgentID: "agt_none", EngineKind: "astrabox", State: "READY"}
	if err := st.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	var log []store.LogEntry
	for i := range turns {
		turn := fmt.Sprintf("turn_%d", i)
		add := func(typ, payload string) {
			log = append(log, store.LogEntry{Type: typ, TurnID: turn, InputID: "in_" + turn, MessageID: "msg_" + turn,
				Payload: json.RawMessage(payload)})
		}
		add("input.accepted", fmt.Sprintf(`{"content":"question %d"}`, i))
		add("data-turn-accepted", `{"type":"data-turn-accepted","data":{}}`)
		add("start", `{"type":"start","messageId":"msg_`+turn+`"}`)
		add("text-start", `{"type":"text-start","id":"t"}`)
		for range deltas {
			add("text-delta", `{"type":"text-delta","id":"t","delta":"word "}`)
		}
		add("text-end", `{"type":"text-end","id":"t"}`)
		add("finish", `{"type":"finish","finishReason":"stop"}`)
	}
	if _, err := st.Append(ctx, s.ID, 0, log); err != nil {
		t.Fatal(err)
	}
	for i := range log {
		log[i].Seq = int64(i + 1)
	}
	return s.ID, log
}

// getMessages GETs a Session's messages with query and returns the status
// and the page.
func getMessages(t *testing.T, e *env, id, query string) (int, wire.Transcript) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, e.srv.URL+"/api/v1/sessions/"+id+"/messages"+query, nil)
	req.Header.Set(api.HeaderAPIKey, testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p wire.Transcript
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, p
}

// TestSessionMessagesPages: a Session's messages come a bounded page at a
// time, newest first; before_seq reaches the earlier ones.
func TestSessionMessagesPages(t *testing.T) {
	e := newEnv(t, 0)
	const turns, deltas = 3, platform.MessagesPageEntries / 2
	id, log := longSession(t, e, "ses_long", turns, deltas)
	head := int64(len(log))
	ctx := ctxT(t)

	status, last := getMessages(t, e, id, "")
	if status != http.StatusOK || last.LastSeq != head || last.FirstSeq <= 1 || last.LastSeq-last.FirstSeq+1 > platform.MessagesPageEntries {
		t.Fatalf("latest page: %d, seqs %d to %d of %d", status, last.FirstSeq, last.LastSeq, head)
	}
	var pages []wire.Transcript
	for p := last; ; {
		pages = append([]wire.Transcript{p}, pages...)
		if p.FirstSeq == 1 {
			break
		}
		before := p.FirstSeq
		status, p = getMessages(t, e, id, fmt.Sprintf("?before_seq=%d", before))
		if status != http.StatusOK || p.LastSeq != before-1 || p.FirstSeq < 1 || p.LastSeq-p.FirstSeq+1 > platform.MessagesPageEntries {
			t.Fatalf("page before %d: %d, seqs %d to %d", before, status, p.FirstSeq, p.LastSeq)
		}
	}
	var got []string
	for _, p := range pages {
		for _, m := range p.Messages {
			got = append(got, fmt.Sprintf("%s:%d", m.ID, len(m.Parts)))
		}
	}
	var want []string
	for i := range turns {
		want = append(want, fmt.Sprintf("in_turn_%d:1", i), fmt.Sprintf("msg_turn_%d:1", i))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("messages of the pages %v, want %v", got, want)
	}
	if text := last.Messages[len(last.Messages)-1].Parts[0]["text"]; text != strings.Repeat("word ", deltas) {
		t.Fatalf("the last reply's text is %d bytes", len(fmt.Sprint(text)))
	}

	tr, err := e.c.Messages(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if tr.FirstSeq != 1 || tr.LastSeq != head || jsonOf(t, tr.Messages) != jsonOf(t, platform.FoldMessages(log)) {
		t.Fatalf("the SDK's transcript, seqs %d to %d, is not the whole log's", tr.FirstSeq, tr.LastSeq)
	}

	for _, q := range []string{"?before_seq=0", "?before_seq=-1", "?before_seq=x"} {
		if status, _ := getMessages(t, e, id, q); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, status)
		}
	}
	if status, _ := getMessages(t, e, "ses_nope", ""); status != http.StatusNotFound {
		t.Errorf("an unknown Session: %d, want 404", status)
	}
}

// TestSessionMessagesSplitReply: a reply longer than a page is on two
// pages, and the SDK joins them into the one message.
func TestSessionMessagesSplitReply(t *testing.T) {
	e := newEnv(t, 0)
	const deltas = platform.MessagesPageEntries + 10
	id, log := longSession(t, e, "ses_split", 1, deltas)
	status, last := getMessages(t, e, id, "")
	if status != http.StatusOK || last.FirstSeq <= 1 || len(last.Messages) != 1 || last.Messages[0].ID != "msg_turn_0" {
		t.Fatalf("latest page: %d, seqs %d to %d, %d messages", status, last.FirstSeq, last.LastSeq, len(last.Messages))
	}
	tr, err := e.c.Messages(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Messages) != 2 || tr.Messages[1].Text() != strings.Repeat("word ", deltas) || tr.Messages[1].Metadata["finish_reason"] != "stop" ||
		tr.FirstSeq != 1 || tr.LastSeq != int64(len(log)) {
		t.Fatalf("the SDK's transcript: %d messages, seqs %d to %d", len(tr.Messages), tr.FirstSeq, tr.LastSeq)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
