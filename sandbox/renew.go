package sandbox

import (
	"context"
	"time"
)

// Renewer is implemented by providers whose boxes carry an expiry of their
// own, beside the server's record: a backend that is itself a lifecycle
// service (an OpenSandbox deployment, another AstraBox) expires its boxes
// on its own clock. The server forwards every renewal of such a box before
// it records the new expiry, so the two stay in step.
type Renewer interface {
	// Renew moves the expiry box id has on the backend to at (UTC, in the
	// future). It is idempotent: a box whose backend expiry is at or after
	// at already is left as it is, without an error. A box the backend
	// does not know wraps ErrNotFound; a refusal of the backend (at is
	// beyond its maximum, say) is an *Error with the backend's reason,
	// and then the server records nothing. ctx bounds the call.
	Renew(ctx context.Context, id string, at time.Time) error
}
