package shipyard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/astrabox/astrabox/store"
)

// staleReservation is how long a key stays reserved by a request that
// never answered (its server stopped) before a retry may run.
const staleReservation = 5 * time.Minute

// idempotent runs do once per Idempotency-Key within scope, as Bay does on
// create and extend_ttl: a repeat with the same body gets the first answer
// again (marked Idempotent-Replayed), a repeat with another body is
// conflict (409), a repeat while the first still runs is conflict too.
// Errors are not remembered, so a failed request may be retried with its
// key. Without the header do simply runs. The answers live in the store's
// idempotency records, which the API server expires after a day.
func (h *Handler) idempotent(w http.ResponseWriter, r *http.Request, scope string, body []byte, do func() (int, any, error)) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		status, v, err := do()
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		writeJSON(w, status, v)
		return
	}
	if len(key) > 256 {
		h.writeError(w, r, validation("Idempotency-Key is longer than 256 bytes"))
		return
	}
	sum := sha256.Sum256(body)
	rec := store.Idempotency{Key: "shipyard:" + scope + ":" + key, RequestHash: hex.EncodeToString(sum[:]), CreatedAt: time.Now().UTC()}
	got, existed, err := h.st.PutIdempotency(r.Context(), rec)
	if err == nil && existed && got.Status == 0 && time.Since(got.CreatedAt) > staleReservation {
		_ = h.st.DeleteIdempotency(r.Context(), rec.Key)
		got, existed, err = h.st.PutIdempotency(r.Context(), rec)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if existed {
		switch {
		case got.RequestHash != rec.RequestHash:
			h.writeError(w, r, newError(http.StatusConflict, codeConflict, "Idempotency-Key was used with a different request body"))
		case got.Status == 0:
			h.writeError(w, r, newError(http.StatusConflict, codeConflict, "a request with this Idempotency-Key is still in progress"))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(got.Status)
			_, _ = w.Write(got.Body)
		}
		return
	}
	status, v, err := do()
	if err != nil {
		_ = h.st.DeleteIdempotency(r.Context(), rec.Key)
		h.writeError(w, r, err)
		return
	}
	b, _ := json.Marshal(v)
	b = append(b, '\n')
	rec.Status, rec.Body = status, b
	if err := h.st.CompleteIdempotency(r.Context(), rec); err != nil {
		h.log.Warn("remember idempotent answer", "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
