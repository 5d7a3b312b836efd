package shipyard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/astrabox/astrabox/identity"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// box is what the facade keeps in memory of one sandbox: its execd client,
// its python context and the turn of python execs. Everything here can be
// rebuilt from the box itself after a restart.
type box struct {
	// py holds one token: python execs take it, so a second concurrent
	// exec waits its turn instead of failing on the busy context.
	py chan struct{}

	mu     sync.Mutex
	client *execdclient.Client
	// pyctx is the python code context ("" until the first python exec or
	// after stop); its id is also in the record's metadata (metaPyContext)
	// so that a restarted server finds it.
	pyctx string
	// stopped is set by stop on a backend that cannot pause: the box is
	// reported idle until the next exec.
	stopped bool
}

func (h *Handler) box(id string) *box {
	if b, ok := h.boxes.Load(id); ok {
		return b.(*box)
	}
	b := &box{py: make(chan struct{}, 1)}
	b.py <- struct{}{}
	got, _ := h.boxes.LoadOrStore(id, b)
	return got.(*box)
}

func (h *Handler) forget(id string) { h.boxes.Delete(id) }

// execd returns a client for rec's execd, made once per box: through the
// backend's Dial, with the box's access token.
func (h *Handler) execd(ctx context.Context, rec *store.Sandbox) (*execdclient.Client, error) {
	b := h.box(rec.ID)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.client != nil {
		return b.client, nil
	}
	tok, err := h.svc.AccessToken(ctx, rec)
	if err != nil {
		return nil, err
	}
	r := *rec
	b.client = execdclient.New("http://execd", execdclient.WithToken(tok),
		execdclient.WithDialer(func(ctx context.Context) (net.Conn, error) { return h.svc.Dial(ctx, &r) }))
	return b.client, nil
}

// pingTimeout bounds the readiness probe of a GET.
const pingTimeout = 2 * time.Second

// alive reports whether rec's execd answers now.
func (h *Handler) alive(ctx context.Context, rec *store.Sandbox) bool {
	c, err := h.execd(ctx, rec)
	if err != nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	return c.Ping(pctx) == nil
}

// expired reports whether rec's TTL has passed (the reconciler deletes it
// soon).
func expired(rec *store.Sandbox) bool {
	return rec.ExpiresAt != nil && !time.Now().Before(*rec.ExpiresAt)
}

// get returns the record of a sandbox the facade may show: not_found for
// an unknown one and for one being deleted by a user.
func (h *Handler) get(ctx context.Context, id string) (*store.Sandbox, error) {
	rec, err := h.svc.Get(ctx, id)
	if err != nil {
		if sandbox.CodeOf(err) == sandbox.CodeSandboxNotFound {
			h.forget(id) // really gone: drop what is kept of it
			return nil, newError(http.StatusNotFound, codeNotFound, "sandbox "+quote(id)+" not found")
		}
		return nil, err
	}
	if !identity.PrincipalFrom(ctx).Owns(rec.OwnerID) {
		// Another user's box is as absent as a missing one, but it is
		// there: its owner's cached state (client, python context and
		// its lock) stays.
		return nil, newError(http.StatusNotFound, codeNotFound, "sandbox "+quote(id)+" not found")
	}
	if rec.State == sandbox.StateTerminated || (rec.State == sandbox.StateStopping && !expiredReason(rec.Reason)) {
		return nil, newError(http.StatusNotFound, codeNotFound, "sandbox "+quote(id)+" not found")
	}
	return rec, nil
}

func expiredReason(reason string) bool { return reason == "ttl_expiry" || reason == "idle_timeout" }

// ready waits until a command would succeed in sandbox id and returns its
// record and execd client: it waits out a box that is starting or
// resuming, resumes one that was stopped, and gives up with
// sandbox_expired, ship_error (a failed box) or not_found. wait bounds the
// wait; past it the answer is session_not_ready (503), or for an exec,
// whose client does not retry, the request's own deadline (timeout).
func (h *Handler) ready(ctx context.Context, id string, wait time.Duration, exec bool) (*store.Sandbox, *execdclient.Client, error) {
	deadline := time.Now().Add(wait)
	delay := 50 * time.Millisecond
	for {
		rec, err := h.get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if expired(rec) || rec.State == sandbox.StateStopping {
			return nil, nil, newError(http.StatusConflict, codeExpired, "sandbox "+id+" has expired")
		}
		switch rec.State {
		case sandbox.StateFailed:
			e := newError(http.StatusBadGateway, codeShipError, "sandbox "+id+" failed: "+rec.Reason)
			return nil, nil, e
		case sandbox.StatePaused:
			if _, err := h.svc.Resume(ctx, id); err != nil && sandbox.CodeOf(err) != sandbox.CodeConflict {
				return nil, nil, err
			}
			continue
		case sandbox.StateRunning:
			b := h.box(id)
			c, err := h.execd(ctx, rec)
			if err == nil && h.alive(ctx, rec) {
				b.mu.Lock()
				b.stopped = false
				b.mu.Unlock()
				h.svc.Touch(ctx, rec)
				return rec, c, nil
			}
		}
		if time.Now().After(deadline) {
			if exec {
				return nil, nil, &Error{Status: http.StatusGatewayTimeout, Code: codeTimeout,
					Message: "sandbox " + id + " did not become ready within " + wait.String()}
			}
			return nil, nil, notReady(id)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, nil, ctx.Err()
			}
			return nil, nil, notReady(id)
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}
