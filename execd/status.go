package execd

import "net/http"

// Status (addition) is the body of GET /status: what the box is busy with,
// for a server deciding whether a sandbox is idle.
type statusResponse struct {
	RunningCommands int `json:"running_commands"`
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	s.commands.mu.Lock()
	n := s.commands.running
	s.commands.mu.Unlock()
	writeJSON(w, http.StatusOK, statusResponse{RunningCommands: n})
}
