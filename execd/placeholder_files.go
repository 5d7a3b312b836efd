package execd

// Placeholder until files.go registers the /files and /directories routes.

func (s *Server) registerFiles() {}
