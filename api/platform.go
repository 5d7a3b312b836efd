package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/sandbox"
)

// platformRoutes registers the agent platform's /api/v1 routes.
func (s *Server) platformRoutes() {
	s.handle("GET /api/v1/engines", s.listEngines)
	s.handle("GET /api/v1/runtime-profiles", s.listRuntimeProfiles)
	s.handle("GET /api/v1/runtime-profiles/{name}", s.getRuntimeProfile)
	s.handle("PUT /api/v1/runtime-profiles/{name}", s.putRuntimeProfile)
	s.handle("DELETE /api/v1/runtime-profiles/{name}", s.deleteRuntimeProfile)
	s.handle("POST /api/v1/runtime-profiles/{name}/test-model", s.testModel)
	s.handle("GET /api/v1/agents", s.listAgents)
	s.handle("POST /api/v1/agents", s.createAgent)
	s.handle("GET /api/v1/agents/{id}", s.getAgent)
	s.handle("PUT /api/v1/agents/{id}", s.updateAgent)
	s.handle("DELETE /api/v1/agents/{id}", s.deleteAgent)
	s.handle("POST /api/v1/agents/{id}/conversations", s.createConversation)
	s.handle("GET /api/v1/vaults", s.listVaults)
	s.handle("POST /api/v1/vaults", s.createVault)
	s.handle("GET /api/v1/vaults/{id}", s.getVault)
	s.handle("PUT /api/v1/vaults/{id}", s.updateVault)
	s.handle("DELETE /api/v1/vaults/{id}", s.deleteVault)
	s.handle("PUT /api/v1/vaults/{id}/secrets/{name}", s.putSecret)
	s.handle("DELETE /api/v1/vaults/{id}/secrets/{name}", s.deleteSecret)
	s.handle("GET /api/v1/sessions", s.listSessions)
	s.handle("GET /api/v1/sessions/{id}", s.getSession)
	s.handle("DELETE /api/v1/sessions/{id}", s.deleteSession)
	s.handle("POST /api/v1/sessions/{id}/turn-inputs", s.sendInput)
	s.handle("POST /api/v1/sessions/{id}/interrupt", s.interruptSession)
	s.handle("POST /api/v1/sessions/{id}/interaction-respond", s.respondInteraction)
	s.handle("GET /api/v1/sessions/{id}/messages", s.sessionMessages)
	s.handle("GET /api/v1/sessions/{id}/events", s.sessionEvents)
	s.handle("GET /api/v1/sessions/{id}/ai-stream", s.aiStream)
}

// listPage reads limit and cursor.
func listPage(r *http.Request) (string, int, error) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return "", 0, sandbox.Errorf(platform.CodeInvalid, "limit must be 1 to 200")
		}
		limit = n
	}
	return r.URL.Query().Get("cursor"), limit, nil
}

func page[T any](items []T, next string) map[string]any {
	var nc any
	if next != "" {
		nc = next
	}
	if items == nil {
		items = []T{}
	}
	return map[string]any{"items": items, "next_cursor": nc}
}

// engineInfo is an installed engine kind on the wire.
type engineInfo struct {
	engine.Descriptor
	// Images says per enabled backend whether the image the program
	// needs is present ("" image: any image works, always true).
	Images map[string]bool `json:"images"`
}

// listEngines lists the engine kinds that can run here: each with, per
// backend, whether the image its program needs is there; a kind whose
// image no backend has is left out.
func (s *Server) listEngines(w http.ResponseWriter, r *http.Request) {
	items := []engineInfo{}
	for _, kind := range sortedKeys(s.cat.Engines()) {
		d := s.cat.Engines()[kind].Descriptor()
		info := engineInfo{Descriptor: d, Images: map[string]bool{}}
		anywhere := false
		for name, p := range s.svc.Backends() {
			has := d.Image == ""
			if c, ok := p.(sandbox.ImageChecker); ok && !has {
				var err error
				if has, err = c.HasImage(r.Context(), d.Image); err != nil {
					s.log.Warn("check an engine's image", "engine_kind", kind, "backend", name, "err", err)
				}
			}
			info.Images[name] = has
			anywhere = anywhere || has
		}
		if anywhere {
			items = append(items, info)
		}
	}
	writeJSON(w, http.StatusOK, page(items, ""))
}

func (s *Server) listRuntimeProfiles(w http.ResponseWriter, r *http.Request) {
	ps, err := s.cat.ListRuntimeProfiles(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page(ps, ""))
}

func (s *Server) getRuntimeProfile(w http.ResponseWriter, r *http.Request) {
	p, err := s.cat.RuntimeProfile(r.Context(), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, platform.Redact(p))
}

func (s *Server) putRuntimeProfile(w http.ResponseWriter, r *http.Request) {
	var p lifecycle.Profile
	if err := s.decode(w, r, &p); err != nil {
		writeError(w, asPlatformInvalid(err))
		return
	}
	name := r.PathValue("name")
	if p.Name != "" && p.Name != name {
		writeError(w, sandbox.Errorf(platform.CodeInvalid, "profile name %q in the body differs from %q in the path", p.Name, name))
		return
	}
	p.Name = name
	out, err := s.cat.PutRuntimeProfile(r.Context(), p)
	if err != nil {
		writeError(w, asPlatformInvalid(err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteRuntimeProfile(w http.ResponseWriter, r *http.Request) {
	if err := s.cat.DeleteRuntimeProfile(r.Context(), r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// asPlatformInvalid answers the sandbox layer's invalid-body code with the
// platform's INVALID_REQUEST on /api/v1 routes.
func asPlatformInvalid(err error) error {
	var e *sandbox.Error
	if errors.As(err, &e) && e.Code == sandbox.CodeInvalidRequest {
		return &sandbox.Error{Code: platform.CodeInvalid, Message: e.Message}
	}
	return err
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := listPage(r)
	if err != nil {
		writeError(w, err)
		return
	}
	as, next, err := s.cat.ListAgents(r.Context(), cursor, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page(as, next))
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request) {
	var req platform.AgentRequest
	if err := s.decode(w, r, &req); err != nil {
		writeError(w, asPlatformInvalid(err))
		return
	}
	a, err := s.cat.CreateAgent(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	a, err := s.cat.GetAgent(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) updateAgent(w http.ResponseWriter, r *http.Request) {
	var req platform.AgentRequest
	if err := s.decode(w, r, &req); err != nil {
		writeError(w, asPlatformInvalid(err))
		return
	}
	a, err := s.cat.UpdateAgent(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) deleteAgent(w http.ResponseWriter, r *http.Request) {
	if err := s.cat.DeleteAgent(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// conversationRequest is the body of POST /agents/{id}/conversations.
type conversationRequest struct {
	Title string `json:"title"`
}

func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	var req conversationRequest
	if len(body) > 0 {
		if err := decodeBytes(body, &req); err != nil {
			writeError(w, asPlatformInvalid(err))
			return
		}
	}
	agentID := r.PathValue("id")
	s.idempotentReplay(w, r, "conversation:"+agentID, body, http.StatusOK, func() (int, any, error) {
		sess, err := s.sess.CreateSession(r.Context(), agentID, req.Title)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, map[string]string{"session_id": sess.ID, "agent_id": sess.AgentID}, nil
	})
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := listPage(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ss, next, err := s.sess.ListSessions(r.Context(), r.URL.Query().Get("agent_id"), cursor, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page(ss, next))
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.sess.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	if err := s.sess.DeleteSession(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// turnInputRequest is the body of POST /sessions/{id}/turn-inputs.
type turnInputRequest struct {
	Content         string `json:"content"`
	ClientMessageID string `json:"client_message_id"`
}

func (s *Server) sendInput(w http.ResponseWriter, r *http.Request) {
	var req turnInputRequest
	if err := s.decode(w, r, &req); err != nil {
		writeError(w, asPlatformInvalid(err))
		return
	}
	rc, created, err := s.sess.SendInput(r.Context(), r.PathValue("id"), req.Content, req.ClientMessageID)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, rc)
}

func (s *Server) interruptSession(w http.ResponseWriter, r *http.Request) {
	if s.forwardToHolder(w, r, r.PathValue("id")) {
		return
	}
	ok, err := s.sess.Interrupt(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	status := "noop"
	if ok {
		status = "accepted"
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": status})
}

// respondRequest is the body of POST /sessions/{id}/interaction-respond.
type respondRequest struct {
	InteractionID string `json:"interaction_id"`
	Answer        struct {
		Decision string   `json:"decision"`
		Comment  string   `json:"comment"`
		Answers  []string `json:"answers"`
	} `json:"answer"`
}

func (s *Server) respondInteraction(w http.ResponseWriter, r *http.Request) {
	if s.forwardToHolder(w, r, r.PathValue("id")) {
		return
	}
	var req respondRequest
	if err := s.decode(w, r, &req); err != nil {
		writeError(w, asPlatformInvalid(err))
		return
	}
	if req.InteractionID == "" {
		writeError(w, sandbox.Errorf(platform.CodeInvalid, "interaction_id is required"))
		return
	}
	err := s.sess.Respond(r.Context(), r.PathValue("id"), engine.Answer{InteractionID: req.InteractionID,
		Decision: req.Answer.Decision, Comment: req.Answer.Comment, Answers: req.Answer.Answers})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "accepted"})
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
func (s *Server) sessionMessages(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.sess.GetSession(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	var before int64
	if v := r.URL.Query().Get("before_seq"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			writeError(w, sandbox.Errorf(platform.CodeInvalid, "before_seq must be a positive sequence number"))
			return
		}
		before = n
	}
	page, err := s.sess.Messages(r.Context(), id, before)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
