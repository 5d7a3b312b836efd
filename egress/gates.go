package egress

// Gates is what a backend needs of the server's egress proxy, and all it
// gets of it: opening a gate for a network of boxes, finding the proxy
// state of a box it put behind one (to change its policy), and the CA a
// box created with credentialProxy must trust. *Manager implements it. A
// backend's config holds a nil Gates, never a nil *Manager, when the
// server runs no egress proxy. Implementations are safe for concurrent
// use.
type Gates interface {
	// OpenGate opens a gate's listeners and serves them until the gate is
	// closed (by its Close, or when the proxy closes): a backend that
	// keeps a gate opens a new one when Gate.Closed reports true.
	OpenGate(cfg GateConfig) (*Gate, error)
	// Box returns box id's proxy state, or nil when no open gate has it.
	Box(id string) *Box
	// CredentialProxyCA returns the CA certificate (PEM) a box created
	// with credentialProxy must trust; an error of code
	// CAPABILITY_NOT_SUPPORTED when the proxy cannot terminate TLS.
	CredentialProxyCA() ([]byte, error)
}

var _ Gates = (*Manager)(nil)
