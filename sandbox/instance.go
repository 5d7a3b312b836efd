package sandbox

import "context"

// Instancer is implemented by providers that can name the backend
// instance they drive: the thing whose boxes every replica serving it sees
// alike. A native backend is one host's (its data dir on that host); a
// Docker backend is one engine (its ID), shared by every replica that
// talks to it; a cluster is cluster + namespace. The name is stable across
// restarts, the same from every replica that serves the instance, and
// different for different instances. Records carry it, so a replica
// reconciles and reaches only the boxes of instances it serves.
type Instancer interface {
	// Instance returns the instance's name, "kind:identity".
	Instance(ctx context.Context) (string, error)
}
