package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// HeaderIdempotencyKey makes create and renew safe to retry.
const HeaderIdempotencyKey = "Idempotency-Key"

// idempotencyTTL is how long an answer is remembered.
const idempotencyTTL = 24 * time.Hour

// staleReservation is how long a key may stay reserved by a request that
// has not answered before another request with it may take over.
const staleReservation = 5 * time.Minute

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, sandbox.Errorf(sandbox.CodePayloadTooLarge, "request body exceeds %d bytes", limit)
	}
	if err != nil {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "read request body: %v", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "request body is empty; a JSON object is required")
	}
	return b, nil
}

// idempotent runs do once per Idempotency-Key (scoped by scope): a repeat
// with the same body gets the first answer again; a different body gets
// 422. Without the header, do simply runs. Errors are not remembered, so a
// failed request can be retried with the same key.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, scope string, body []byte, do func() (int, any, error)) {
	s.idempotentReplay(w, r, scope, body, 0, do)
}

// idempotentReplay is idempotent with the status of a replayed answer
// set to replayStatus (0: the first answer's status).
func (s *Server) idempotentReplay(w http.ResponseWriter, r *http.Request, scope string, body []byte, replayStatus int, do func() (int, any, error)) {
	key := r.Header.Get(HeaderIdempotencyKey)
	if key == "" {
		status, v, err := do()
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, status, v)
		return
	}
	if len(key) > 256 {
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "Idempotency-Key is longer than 256 bytes"))
		return
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	fullKey := scope + ":" + key
	// Reserve the key first, so concurrent repeats do not both run.
	pending := store.Idempotency{Key: fullKey, RequestHash: hash, Status: 0, CreatedAt: time.Now().UTC()}
	got, existed, err := s.cfg.Store.PutIdempotency(r.Context(), pending)
	if err != nil {
		writeError(w, err)
		return
	}
	if existed && got.Status == 0 && time.Since(got.CreatedAt) > staleReservation {
		// The request that reserved the key never answered (the server
		// stopped mid-way): release it and run this one.
		_ = s.cfg.Store.DeleteIdempotency(r.Context(), fullKey)
		got, existed, err = s.cfg.Store.PutIdempotency(r.Context(), pending)
		if err != nil {
			writeError(w, err)
			return
		}
	}
	if existed {
		switch {
		case got.RequestHash != hash:
			writeError(w, &sandbox.Error{Code: sandbox.CodeIdempotencyMismatch, Message: "Idempotency-Key was used with a different request body"})
		case got.Status == 0:
			writeError(w, sandbox.Errorf(sandbox.CodeConflict, "a request with this Idempotency-Key is still in progress"))
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
		_ = s.cfg.Store.DeleteIdempotency(r.Context(), fullKey)
		writeError(w, err)
		return
	}
	b, _ := json.Marshal(v)
	done := store.Idempotency{Key: fullKey, RequestHash: hash, Status: status, Body: b, CreatedAt: pending.CreatedAt}
	if err := s.cfg.Store.CompleteIdempotency(r.Context(), done); err != nil {
		s.log.Warn("remember idempotent answer", "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// ForgetIdempotency removes remembered answers older than a day, every
// interval, until ctx ends.
func (s *Server) ForgetIdempotency(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.cfg.Store.DeleteIdempotencyBefore(ctx, time.Now().Add(-idempotencyTTL)); err != nil && ctx.Err() == nil {
			s.log.Warn("forget idempotency keys", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
