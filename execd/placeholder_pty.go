package execd

// Placeholder until pty.go and proxy.go exist.

type ptyTable struct{}

func (s *Server) registerPTY()   {}
func (s *Server) registerProxy() {}
func (s *Server) closePTYs()     {}
