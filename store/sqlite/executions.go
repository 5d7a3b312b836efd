package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/astrabox/astrabox/store"
)

const executionColumns = `seq, id, sandbox_id, exec_type, code, success, execution_time_ms, output,
	error, description, tags, notes, created_at`

// AppendExecution stores e and sets e.Seq; ErrNotFound when the sandbox
// has no record, ErrConflict when e.ID exists.
func (st *Store) AppendExecution(ctx context.Context, e *store.Execution) error {
	e.CreatedAt = fromMicros(micros(nowIfZero(e.CreatedAt)))
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append execution: %w", err)
	}
	defer tx.Rollback()
	var one int
	err = tx.QueryRowContext(ctx, `SELECT 1 FROM sandboxes WHERE id = ?`, e.SandboxID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("append execution to sandbox %s: %w", e.SandboxID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("append execution: %w", err)
	}
	var seq int64
	err = tx.QueryRowContext(ctx, `INSERT INTO executions (id, sandbox_id, exec_type, code, success,
		execution_time_ms, output, error, description, tags, notes, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING seq`,
		e.ID, e.SandboxID, e.Type, e.Code, e.Success, e.ExecutionTimeMs, e.Output,
		nullString(e.Error), nullString(e.Description), nullString(e.Tags), nullString(e.Notes),
		micros(e.CreatedAt)).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("append execution %s: %w", e.ID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("append execution: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append execution: %w", err)
	}
	e.Seq = seq
	return nil
}

// GetExecution returns execution id of sandboxID, or ErrNotFound.
func (st *Store) GetExecution(ctx context.Context, sandboxID, id string) (*store.Execution, error) {
	e, err := scanExecution(st.r.QueryRowContext(ctx, `SELECT `+executionColumns+` FROM executions
		WHERE sandbox_id = ? AND id = ?`, sandboxID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get execution %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get execution: %w", err)
	}
	return e, nil
}

// ListExecutions returns the matching executions, newest first, and their
// count before paging.
func (st *Store) ListExecutions(ctx context.Context, sandboxID string, f store.ExecutionFilter) ([]*store.Execution, int, error) {
	where := []string{"sandbox_id = ?"}
	args := []any{sandboxID}
	if f.Type != "" {
		where, args = append(where, "exec_type = ?"), append(args, f.Type)
	}
	if f.SuccessOnly {
		where = append(where, "success = 1")
	}
	cond := strings.Join(where, " AND ")
	var total int
	if err := st.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM executions WHERE `+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list executions: %w", err)
	}
	limit := -1 // SQLite: no bound
	if f.Limit > 0 {
		limit = f.Limit
	}
	rows, err := st.r.QueryContext(ctx, `SELECT `+executionColumns+` FROM executions WHERE `+cond+`
		ORDER BY seq DESC LIMIT ? OFFSET ?`, append(args, limit, max(f.Offset, 0))...)
	if err != nil {
		return nil, 0, fmt.Errorf("list executions: %w", err)
	}
	defer rows.Close()
	out := []*store.Execution{}
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("list executions: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list executions: %w", err)
	}
	return out, total, nil
}

// AnnotateExecution applies n and returns the execution as stored.
func (st *Store) AnnotateExecution(ctx context.Context, sandboxID, id string, n store.ExecutionNotes) (*store.Execution, error) {
	e, err := scanExecution(st.w.QueryRowContext(ctx, `UPDATE executions SET
		description = COALESCE(?, description), tags = COALESCE(?, tags), notes = COALESCE(?, notes)
		WHERE sandbox_id = ? AND id = ? RETURNING `+executionColumns,
		nullString(n.Description), nullString(n.Tags), nullString(n.Notes), sandboxID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("annotate execution %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("annotate execution: %w", err)
	}
	return e, nil
}

func scanExecution(r rowScanner) (*store.Execution, error) {
	var (
		e                         store.Execution
		errText, desc, tags, note sql.NullString
		created                   int64
	)
	if err := r.Scan(&e.Seq, &e.ID, &e.SandboxID, &e.Type, &e.Code, &e.Success, &e.ExecutionTimeMs, &e.Output,
		&errText, &desc, &tags, &note, &created); err != nil {
		return nil, err
	}
	e.Error, e.Description, e.Tags, e.Notes = fromNullString(errText), fromNullString(desc), fromNullString(tags), fromNullString(note)
	e.CreatedAt = fromMicros(created)
	return &e, nil
}

func nullString(s *string) sql.NullString {
	if s == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *s, Valid: true}
}

func fromNullString(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}
