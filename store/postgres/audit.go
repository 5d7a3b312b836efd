package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// AppendAudit appends e (a zero At set to now) and writes its Seq back.
func (st *Store) AppendAudit(ctx context.Context, e *store.AuditEntry) error {
	e.At = nowIfZero(e.At).Truncate(time.Microsecond)
	var detail []byte
	if len(e.Detail) > 0 {
		detail = e.Detail
	}
	if err := st.pool.QueryRow(ctx, `INSERT INTO audit (at, actor_id, action, target, request_id, detail)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq`,
		e.At, e.ActorID, e.Action, e.Target, e.RequestID, detail).Scan(&e.Seq); err != nil {
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
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.ActorID != "" {
		where = append(where, "actor_id = "+arg(f.ActorID))
	}
	if strings.HasSuffix(f.Action, ".") {
		where = append(where, "left(action, "+arg(len(f.Action))+") = "+arg(f.Action))
	} else if f.Action != "" {
		where = append(where, "action = "+arg(f.Action))
	}
	if f.Target != "" {
		where = append(where, "target = "+arg(f.Target))
	}
	if f.BeforeSeq > 0 {
		where = append(where, "seq < "+arg(f.BeforeSeq))
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= "+arg(f.Since))
	}
	q := `SELECT seq, at, actor_id, action, target, request_id, detail FROM audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC LIMIT " + arg(sqlLimit(int64(f.Limit)))
	rows, err := st.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.AuditEntry, error) {
		var e store.AuditEntry
		err := r.Scan(&e.Seq, &e.At, &e.ActorID, &e.Action, &e.Target, &e.RequestID, &e.Detail)
		e.At = e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}
