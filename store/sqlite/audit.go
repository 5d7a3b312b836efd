package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/astrabox/astrabox/store"
)

// AppendAudit appends e (a zero At set to now) and writes its Seq back.
func (st *Store) AppendAudit(ctx context.Context, e *store.AuditEntry) error {
	e.At = fromMicros(micros(nowIfZero(e.At)))
	var detail []byte
	if len(e.Detail) > 0 {
		detail = e.Detail
	}
	if err := st.w.QueryRowContext(ctx, `INSERT INTO audit (at, actor_id, action, target, request_id, detail)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING seq`,
		micros(e.At), e.ActorID, e.Action, e.Target, e.RequestID, detail).Scan(&e.Seq); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// ListAudit returns the entries f selects, newest first.
func (st *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	var (
		where []string
		args  []any
	)
	if f.ActorID != "" {
		where, args = append(where, "actor_id = ?"), append(args, f.ActorID)
	}
	if prefix, ok := strings.CutSuffix(f.Action, "."); ok {
		where, args = append(where, "substr(action, 1, ?) = ?"), append(args, len(f.Action), prefix+".")
	} else if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	if f.Target != "" {
		where, args = append(where, "target = ?"), append(args, f.Target)
	}
	if f.BeforeSeq > 0 {
		where, args = append(where, "seq < ?"), append(args, f.BeforeSeq)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, micros(f.Since))
	}
	q := `SELECT seq, at, actor_id, action, target, request_id, detail FROM audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC LIMIT ?"
	rows, err := st.r.QueryContext(ctx, q, append(args, sqlLimit(int64(f.Limit)))...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []store.AuditEntry
	for rows.Next() {
		var (
			e      store.AuditEntry
			at     int64
			detail []byte
		)
		if err := rows.Scan(&e.Seq, &at, &e.ActorID, &e.Action, &e.Target, &e.RequestID, &detail); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		e.At, e.Detail = fromMicros(at), detail
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}
