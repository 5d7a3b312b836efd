package execd

// Route registration and shutdown hooks of concerns still being written.
// Each moves to its concern's file.

type sessionTable struct{}
type contextTable struct{}
type ptyTable struct{}
type metricsSampler struct{}

func (s *Server) registerSessions() {}
func (s *Server) registerCode()     {}
func (s *Server) registerFiles()    {}
func (s *Server) registerPTY()      {}
func (s *Server) registerProxy()    {}
func (s *Server) registerMetrics()  {}
func (s *Server) closeSessions()    {}
func (s *Server) closeContexts()    {}
func (s *Server) closePTYs()        {}
func (s *Server) closeMetrics()     {}
