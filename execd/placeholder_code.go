package execd

// Placeholder until session.go, code.go and metrics.go exist.

type sessionTable struct{}
type contextTable struct{}
type metricsSampler struct{}

func (s *Server) registerSessions() {}
func (s *Server) registerCode()     {}
func (s *Server) registerMetrics()  {}
func (s *Server) closeSessions()    {}
func (s *Server) closeContexts()    {}
func (s *Server) closeMetrics()     {}
