// Package idempotency makes a request that answers JSON safe to retry
// with an Idempotency-Key header, for every route set of the API: the
// first answer to a key (within a scope) is stored and given again to a
// repeat with the same body; a repeat with another body is refused
// (IDEMPOTENCY_MISMATCH, 422). Errors are not remembered, so a failed
// request can be retried with the same key.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Header makes a request safe to retry.
const Header = "Idempotency-Key"

// TTL is how long an answer is remembered; the server forgets older ones
// (store.Idempotencies.DeleteIdempotencyBefore).
const TTL = 24 * time.Hour

// staleReservation is how long a key may stay reserved by a request that
// has not answered before another request with it may take over, when
// the process that reserved it cannot be told dead sooner (see Keeper).
const staleReservation = 5 * time.Minute

// HeaderBoot names, on /healthz answers, the boot of the process that
// answers: a process's Keeper.Self ends with it.
const HeaderBoot = "X-AstraBox-Boot"

// Keeper runs requests once per Idempotency-Key (Serve). Its zero Self
// and Probe fall back to the staleReservation timer alone.
type Keeper struct {
	Store Store
	Log   *slog.Logger
	// Self names this process in its reservations: its replica's URL (as
	// other replicas reach it), "#", and a boot id new at every start.
	Self string
	// Probe asks the process at url for its boot id (its /healthz
	// HeaderBoot); an error when it does not answer. Nil: never asked.
	Probe func(ctx context.Context, url string) (string, error)
}

// holderGone reports whether the process that reserved a key, holder (a
// Self), is known to be gone: one at this process's address with another
// boot (this replica restarted), or one that does not answer its address
// or answers with another boot. A reservation of this process, or of one
// made before holders were kept, is not.
func (k *Keeper) holderGone(ctx context.Context, holder string) bool {
	if holder == "" || k.Self == "" || holder == k.Self {
		return false
	}
	url, boot, ok := strings.Cut(holder, "#")
	if !ok {
		return false
	}
	selfURL, _, _ := strings.Cut(k.Self, "#")
	if url == selfURL {
		return true
	}
	if k.Probe == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	got, err := k.Probe(ctx, url)
	return err != nil || got != boot
}

// probeTimeout bounds asking another process whether it lives.
const probeTimeout = 2 * time.Second

// ProbeHealth is a Keeper.Probe over HTTP: GET url/healthz, its
// HeaderBoot.
func ProbeHealth(client *http.Client) func(ctx context.Context, url string) (string, error) {
	return func(ctx context.Context, url string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/healthz", nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("healthz answered %d", resp.StatusCode)
		}
		return resp.Header.Get(HeaderBoot), nil
	}
}

// Store keeps the answers: store.Idempotencies without its sweep.
type Store interface {
	PutIdempotency(ctx context.Context, rec store.Idempotency) (store.Idempotency, bool, error)
	CompleteIdempotency(ctx context.Context, rec store.Idempotency) error
	DeleteIdempotency(ctx context.Context, key string) error
}

// Serve answers r with do's status and value (or its error, by
// httpx.WriteError), running do once per Idempotency-Key under scope
// (scope names the operation and its target, as "renew:"+id): a repeat
// with the same body gets the first answer again, with the header
// Idempotent-Replayed and the status replayStatus (0: the first answer's
// status); a repeat with a different body gets 422; one while the first
// is still running gets 409. A reservation whose request never answered
// is taken over once the process that made it is known gone (see
// holderGone), or else after a few minutes. Without the header, do simply
// runs. body is what is compared (the request body as read); k.Log gets a
// failure to store an answer, which the client does not see.
func (k *Keeper) Serve(w http.ResponseWriter, r *http.Request, scope string, body []byte, replayStatus int, do func() (int, any, error)) {
	st, log := k.Store, k.Log
	key := r.Header.Get(Header)
	if key == "" {
		status, v, err := do()
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, status, v)
		return
	}
	if len(key) > 256 {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "Idempotency-Key is longer than 256 bytes"))
		return
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	fullKey := scope + ":" + key
	// Reserve the key first, so concurrent repeats do not both run.
	pending := store.Idempotency{Key: fullKey, RequestHash: hash, Status: 0, CreatedAt: time.Now().UTC(), Holder: k.Self}
	got, existed, err := st.PutIdempotency(r.Context(), pending)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if existed && got.Status == 0 && (time.Since(got.CreatedAt) > staleReservation || k.holderGone(r.Context(), got.Holder)) {
		// The request that reserved the key never answered (its server
		// stopped mid-way): release it and run this one.
		_ = st.DeleteIdempotency(r.Context(), fullKey)
		got, existed, err = st.PutIdempotency(r.Context(), pending)
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
	}
	if existed {
		switch {
		case got.RequestHash != hash:
			httpx.WriteError(w, &sandbox.Error{Code: sandbox.CodeIdempotencyMismatch, Message: "Idempotency-Key was used with a different request body"})
		case got.Status == 0:
			httpx.WriteError(w, sandbox.Errorf(sandbox.CodeConflict, "a request with this Idempotency-Key is still in progress"))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			if replayStatus != 0 {
				got.Status = replayStatus
			}
			w.WriteHeader(got.Status)
			_, _ = w.Write(got.Body)
		}
		return
	}
	status, v, err := do()
	if err != nil {
		_ = st.DeleteIdempotency(r.Context(), fullKey)
		httpx.WriteError(w, err)
		return
	}
	b, _ := json.Marshal(v)
	done := store.Idempotency{Key: fullKey, RequestHash: hash, Status: status, Body: b, CreatedAt: pending.CreatedAt}
	if err := st.CompleteIdempotency(r.Context(), done); err != nil {
		log.Warn("remember idempotent answer", "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
