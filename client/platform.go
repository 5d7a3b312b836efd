package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"

	"github.com/astrabox/astrabox/platform/wire"
)

// This file is the agent platform's half of the SDK: the calls of the
// /api/v1 routes of PLATFORM.md (engines, RuntimeProfiles, Agents,
// Sessions and their inputs). Their wire types are package platform/wire's,
// named in platform_types.go;
// following a Session's output is in follow.go and aistream.go.

// ListEngines returns the installed agent programs.
func (c *Client) ListEngines(ctx context.Context) ([]Engine, error) {
	var out Page[Engine]
	err := c.apiJSON(ctx, http.MethodGet, "/engines", nil, nil, &out, nil)
	return out.Items, err
}

// PutRuntimeProfile creates or replaces the profile named p.Name (with a
// non-zero p.Version, only that version) and returns it as stored, without
// its model key.
func (c *Client) PutRuntimeProfile(ctx context.Context, p RuntimeProfile) (RuntimeProfile, error) {
	if p.Name == "" {
		return RuntimeProfile{}, errors.New("put runtime profile: a name is required")
	}
	p.APIKeySet = false // output only; the server refuses unknown input
	var out RuntimeProfile
	err := c.apiJSON(ctx, http.MethodPut, "/runtime-profiles/"+url.PathEscape(p.Name), nil, p, &out, nil)
	return out, err
}

// GetRuntimeProfile returns a profile (PROFILE_NOT_FOUND if none).
func (c *Client) GetRuntimeProfile(ctx context.Context, name string) (RuntimeProfile, error) {
	var out RuntimeProfile
	err := c.apiJSON(ctx, http.MethodGet, "/runtime-profiles/"+url.PathEscape(name), nil, nil, &out, nil)
	return out, err
}

// ListRuntimeProfiles returns every profile, configured and stored.
func (c *Client) ListRuntimeProfiles(ctx context.Context) ([]RuntimeProfile, error) {
	var out Page[RuntimeProfile]
	err := c.apiJSON(ctx, http.MethodGet, "/runtime-profiles", nil, nil, &out, nil)
	return out.Items, err
}

// DeleteRuntimeProfile removes a stored profile.
func (c *Client) DeleteRuntimeProfile(ctx context.Context, name string) error {
	return c.apiJSON(ctx, http.MethodDelete, "/runtime-profiles/"+url.PathEscape(name), nil, nil, nil, nil)
}

// CreateAgent stores a new Agent.
func (c *Client) CreateAgent(ctx context.Context, req AgentRequest) (Agent, error) {
	var out Agent
	err := c.apiJSON(ctx, http.MethodPost, "/agents", nil, req, &out, nil)
	return out, err
}

// GetAgent returns an Agent (AGENT_NOT_FOUND if none).
func (c *Client) GetAgent(ctx context.Context, id string) (Agent, error) {
	var out Agent
	err := c.apiJSON(ctx, http.MethodGet, "/agents/"+url.PathEscape(id), nil, nil, &out, nil)
	return out, err
}

// ListAgents returns a page of Agents, oldest first.
func (c *Client) ListAgents(ctx context.Context, page PageOptions) (Page[Agent], error) {
	var out Page[Agent]
	err := c.apiJSON(ctx, http.MethodGet, "/agents", page.query(), nil, &out, nil)
	return out, err
}

// UpdateAgent replaces an Agent's fields and returns it at its new
// version. Sessions pick the change up when their runtime is next built.
func (c *Client) UpdateAgent(ctx context.Context, id string, req AgentRequest) (Agent, error) {
	var out Agent
	err := c.apiJSON(ctx, http.MethodPut, "/agents/"+url.PathEscape(id), nil, req, &out, nil)
	return out, err
}

// AgentAccess returns who sees and manages an Agent (anyone who sees it
// may ask).
func (c *Client) AgentAccess(ctx context.Context, id string) (AgentAccess, error) {
	var out AgentAccess
	err := c.apiJSON(ctx, http.MethodGet, "/agents/"+url.PathEscape(id)+"/access", nil, nil, &out, nil)
	return out, err
}

// SetAgentAccess replaces an Agent's visibility, allowed users and admins
// (its owner, one of its admins or an administrator may; FORBIDDEN
// otherwise).
func (c *Client) SetAgentAccess(ctx context.Context, id string, access AgentAccess) (AgentAccess, error) {
	var out AgentAccess
	err := c.apiJSON(ctx, http.MethodPut, "/agents/"+url.PathEscape(id)+"/access", nil, access, &out, nil)
	return out, err
}

// DeleteAgent removes an Agent.
func (c *Client) DeleteAgent(ctx context.Context, id string) error {
	return c.apiJSON(ctx, http.MethodDelete, "/agents/"+url.PathEscape(id), nil, nil, nil, nil)
}

// CreateConversation opens a Session with an Agent; its runtime starts
// building at once.
func (c *Client) CreateConversation(ctx context.Context, agentID string, opts ConversationOptions) (Conversation, error) {
	body := wire.ConversationRequest{Title: opts.Title}
	resp, err := c.apiDo(ctx, http.MethodPost, "/agents/"+url.PathEscape(agentID)+"/conversations", nil, body, idem(opts.IdempotencyKey))
	if err != nil {
		return Conversation{}, err
	}
	var out Conversation
	if err := decodeBody(resp, &out); err != nil {
		return Conversation{}, fmt.Errorf("create conversation: %w", err)
	}
	out.Replayed = resp.StatusCode == http.StatusOK
	return out, nil
}

// GetSession returns a Session (SESSION_NOT_FOUND if none).
func (c *Client) GetSession(ctx context.Context, id string) (Session, error) {
	var out Session
	err := c.apiJSON(ctx, http.MethodGet, "/sessions/"+url.PathEscape(id), nil, nil, &out, nil)
	return out, err
}

// ListSessions returns a page of Sessions, of one Agent when agentID is
// not empty, oldest first.
func (c *Client) ListSessions(ctx context.Context, agentID string, page PageOptions) (Page[Session], error) {
	q := page.query()
	if agentID != "" {
		q.Set("agent_id", agentID)
	}
	var out Page[Session]
	err := c.apiJSON(ctx, http.MethodGet, "/sessions", q, nil, &out, nil)
	return out, err
}

// DeleteSession deletes a Session with its log and releases its sandbox.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.apiJSON(ctx, http.MethodDelete, "/sessions/"+url.PathEscape(id), nil, nil, nil, nil)
}

// SendInput records an input; the Session answers inputs one at a time,
// in order. A non-empty clientMessageID makes the call safe to retry: a
// repeat returns the first receipt (Repeated set) and records nothing.
func (c *Client) SendInput(ctx context.Context, sessionID, content, clientMessageID string) (Receipt, error) {
	body := wire.TurnInput{Content: content, ClientMessageID: clientMessageID}
	resp, err := c.apiDo(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/turn-inputs", nil, body, nil)
	if err != nil {
		return Receipt{}, err
	}
	var out Receipt
	if err := decodeBody(resp, &out); err != nil {
		return Receipt{}, fmt.Errorf("send input: %w", err)
	}
	out.Repeated = resp.StatusCode == http.StatusOK
	return out, nil
}

// Interrupt asks the Session to stop the reply in progress; it reports
// whether there was one. Queued inputs stay queued.
func (c *Client) Interrupt(ctx context.Context, sessionID string) (bool, error) {
	var out wire.InterruptResult
	err := c.apiJSON(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/interrupt", nil, struct{}{}, &out, nil)
	return out.Status == wire.InterruptAccepted, err
}

// Respond answers the Session's pending interaction (INTERACTION_CLOSED
// when interactionID is not the one open).
func (c *Client) Respond(ctx context.Context, sessionID, interactionID string, answer Answer) error {
	body := wire.RespondRequest{InteractionID: interactionID, Answer: answer}
	return c.apiJSON(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/interaction-respond", nil, body, nil, nil)
}

// Messages returns the Session's whole conversation folded from its log:
// it reads every page (MessagesPage), newest first, and joins them.
func (c *Client) Messages(ctx context.Context, sessionID string) (Transcript, error) {
	tr, err := c.MessagesPage(ctx, sessionID, 0)
	for err == nil && tr.FirstSeq > 1 {
		var earlier Transcript
		earlier, err = c.MessagesPage(ctx, sessionID, tr.FirstSeq)
		if err == nil && (earlier.FirstSeq < 1 || earlier.FirstSeq >= tr.FirstSeq) {
			err = fmt.Errorf("messages of session %s: the page before seq %d starts at seq %d", sessionID, tr.FirstSeq, earlier.FirstSeq)
		}
		if err == nil {
			tr = joinTranscripts(earlier, tr)
		}
	}
	if err != nil {
		return Transcript{}, err
	}
	return tr, nil
}

// MessagesPage returns one page of the Session's conversation, the newest
// the server allows in one answer: with beforeSeq 0, up to the log's head;
// else the page before that seq. A page starts at a message's start, but
// a reply longer than a page is split, its message on each page it spans
// (the same ID). When the page's FirstSeq is over 1, earlier messages are
// on the page before FirstSeq.
func (c *Client) MessagesPage(ctx context.Context, sessionID string, beforeSeq int64) (Transcript, error) {
	var q url.Values
	if beforeSeq > 0 {
		q = url.Values{"before_seq": {strconv.FormatInt(beforeSeq, 10)}}
	}
	var out Transcript
	err := c.apiJSON(ctx, http.MethodGet, "/sessions/"+url.PathEscape(sessionID)+"/messages", q, nil, &out, nil)
	return out, err
}

// joinTranscripts returns the pages earlier and later as one: a message on
// both (a reply split between them) is one, with the parts of both and
// the later page's metadata over the earlier's.
func joinTranscripts(earlier, later Transcript) Transcript {
	at := make(map[string]int, len(earlier.Messages))
	for i, m := range earlier.Messages {
		at[m.ID] = i
	}
	msgs := earlier.Messages
	for _, m := range later.Messages {
		i, ok := at[m.ID]
		if !ok {
			msgs = append(msgs, m)
			continue
		}
		msgs[i].Parts = append(msgs[i].Parts, m.Parts...)
		if msgs[i].Metadata == nil {
			msgs[i].Metadata = map[string]any{}
		}
		maps.Copy(msgs[i].Metadata, m.Metadata)
	}
	return Transcript{Messages: msgs, FirstSeq: earlier.FirstSeq, LastSeq: later.LastSeq}
}

// apiDo makes a request of the /api/v1 routes and returns the response of
// a success; any other answer is returned as *APIError.
func (c *Client) apiDo(ctx context.Context, method, path string, query url.Values, in any, header http.Header) (*http.Response, error) {
	return c.request(ctx, method, "/api/v1"+path, query, in, header)
}

// apiJSON is apiDo that decodes a JSON answer into out (when not nil).
func (c *Client) apiJSON(ctx context.Context, method, path string, query url.Values, in, out any, header http.Header) error {
	resp, err := c.apiDo(ctx, method, path, query, in, header)
	if err != nil {
		return err
	}
	if err := decodeBody(resp, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// decodeBody decodes resp's JSON body into out (discarding it when out is
// nil) and closes it.
func decodeBody(resp *http.Response, out any) error {
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}
