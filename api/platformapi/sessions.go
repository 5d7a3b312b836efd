package platformapi

import (
	"net/http"
	"strconv"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// The Sessions' routes, but for their event streams (stream.go).

func (h *Handler) createConversation(w http.ResponseWriter, r *http.Request) {
	body, err := httpx.ReadBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	var req wire.ConversationRequest
	if len(body) > 0 {
		if err := httpx.DecodeBytes(body, &req); err != nil {
			httpx.WriteError(w, asPlatformInvalid(err))
			return
		}
	}
	agentID := r.PathValue("id")
	// A key is the caller's own: another user's same key opens its own
	// Session rather than replaying the first caller's answer.
	caller := ""
	if p := identity.PrincipalFrom(r.Context()); p != nil {
		caller = p.UserID
	}
	h.idempotent(w, r, "conversation:"+caller+":"+agentID, body, http.StatusOK, func() (int, any, error) {
		sess, err := h.sess.CreateSession(r.Context(), agentID, req.Title)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, wire.Conversation{SessionID: sess.ID, AgentID: sess.AgentID}, nil
	})
}

func (h *Handler) listSessions(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := listPage(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	ss, next, err := h.sess.ListSessions(r.Context(), r.URL.Query().Get("agent_id"), cursor, limit)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page(ss, next))
}

func (h *Handler) getSession(w http.ResponseWriter, r *http.Request) {
	sess, err := h.sess.GetSession(r.Context(), r.PathValue("id"))
	httpx.Answer(w, http.StatusOK, sess, err)
}

func (h *Handler) deleteSession(w http.ResponseWriter, r *http.Request) {
	httpx.NoContent(w, h.sess.DeleteSession(r.Context(), r.PathValue("id")))
}

func (h *Handler) sendInput(w http.ResponseWriter, r *http.Request) {
	var req wire.TurnInput
	if err := h.decode(w, r, &req); err != nil {
		httpx.WriteError(w, asPlatformInvalid(err))
		return
	}
	rc, created, err := h.sess.SendInput(r.Context(), r.PathValue("id"), req.Content, req.ClientMessageID)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	httpx.WriteJSON(w, status, rc)
}

func (h *Handler) interruptSession(w http.ResponseWriter, r *http.Request) {
	if err := h.sess.CheckSession(r.Context(), r.PathValue("id")); err != nil {
		httpx.WriteError(w, err)
		return
	}
	ok, err := h.sess.Interrupt(r.Context(), r.PathValue("id"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	res := wire.InterruptResult{Status: wire.InterruptNoop}
	if ok {
		res.Status = wire.InterruptAccepted
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}

func (h *Handler) respondInteraction(w http.ResponseWriter, r *http.Request) {
	if err := h.sess.CheckSession(r.Context(), r.PathValue("id")); err != nil {
		httpx.WriteError(w, err)
		return
	}
	var req wire.RespondRequest
	if err := h.decode(w, r, &req); err != nil {
		httpx.WriteError(w, asPlatformInvalid(err))
		return
	}
	if req.InteractionID == "" {
		httpx.WriteError(w, sandbox.Errorf(platform.CodeInvalid, "interaction_id is required"))
		return
	}
	err := h.sess.Respond(r.Context(), r.PathValue("id"), engine.Answer{InteractionID: req.InteractionID,
		Decision: string(req.Answer.Decision), Comment: req.Answer.Comment, Answers: req.Answer.Answers})
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "accepted"})
}

// sessionMessages serves a Session's conversation as AI SDK UI messages
// folded from its log, a bounded page at a time, newest first (see
// platform.ReadMessages): {messages, first_seq, last_seq}, the messages of
// the log entries first_seq to last_seq (both 0 when none). Without
// before_seq, the page ends at the log's head (last_seq is where a client
// resumes the stream); with before_seq, it ends before that seq. A page
// folds at most platform.MessagesPageEntries entries, of at most
// platform.MessagesPageBytes payload; when first_seq > 1 earlier messages
// exist: ask again with before_seq=first_seq. A reply longer than a page
// is split between pages, its message on each (the same id).
func (h *Handler) sessionMessages(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := h.sess.CheckSession(r.Context(), id); err != nil {
		httpx.WriteError(w, err)
		return
	}
	var before int64
	if v := r.URL.Query().Get("before_seq"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			httpx.WriteError(w, sandbox.Errorf(platform.CodeInvalid, "before_seq must be a positive sequence number"))
			return
		}
		before = n
	}
	page, err := h.sess.Messages(r.Context(), id, before)
	httpx.Answer(w, http.StatusOK, page, err)
}
