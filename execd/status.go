package execd

import (
	"net/http"

	"github.com/astrabox/astrabox/execd/wire"
)

// handleStatus answers GET /status (an addition) with wire.ServerStatus.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	s.commands.mu.Lock()
	n := s.commands.running
	s.commands.mu.Unlock()
	writeJSON(w, http.StatusOK, wire.ServerStatus{RunningCommands: n, OutputTotal: s.cfg.OutputTotal, OutputLimit: s.cfg.OutputLimit,
		OutputRetained: s.cfg.output.Used(), MemoryLimit: max(s.cfg.MemoryLimit, 0)})
}
