package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

const executionColumns = `seq, id, sandbox_id, exec_type, code, success, execution_time_ms, output,
	error, description, tags, notes, created_at`

// AppendExecution stores e and sets e.Seq; ErrNotFound when the sandbox
// has no record, ErrConflict when e.ID exists. The transaction holds the
// sandbox's row against deletion while it inserts.
func (st *Store) AppendExecution(ctx context.Context, e *store.Execution) error {
	e.CreatedAt = nowIfZero(e.CreatedAt).UTC().Truncate(time.Microsecond)
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("append execution: %w", err)
	}
	defer tx.Rollback(ctx)
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM sandboxes WHERE id = $1 FOR KEY SHARE`, e.SandboxID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("append execution to sandbox %s: %w", e.SandboxID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("append execution: %w", err)
	}
	var seq int64
	err = tx.QueryRow(ctx, `INSERT INTO executions (id, sandbox_id, exec_type, code, success,
		execution_time_ms, output, error, description, tags, notes, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING RETURNING seq`,
		e.ID, e.SandboxID, e.Type, e.Code, e.Success, e.ExecutionTimeMs, e.Output,
		e.Error, e.Description, e.Tags, e.Notes, e.CreatedAt).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("append execution %s: %w", e.ID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("append execution: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("append execution: %w", err)
	}
	e.Seq = seq
	return nil
}

// GetExecution returns execution id of sandboxID, or ErrNotFound.
func (st *Store) GetExecution(ctx context.Context, sandboxID, id string) (*store.Execution, error) {
	e, err := scanExecution(st.pool.QueryRow(ctx, `SELECT `+executionColumns+` FROM executions
		WHERE sandbox_id = $1 AND id = $2`, sandboxID, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
	const cond = `sandbox_id = $1 AND ($2 = '' OR exec_type = $2) AND (NOT $3 OR success)`
	var total int
	if err := st.pool.QueryRow(ctx, `SELECT COUNT(*) FROM executions WHERE `+cond,
		sandboxID, f.Type, f.SuccessOnly).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list executions: %w", err)
	}
	rows, err := st.pool.Query(ctx, `SELECT `+executionColumns+` FROM executions WHERE `+cond+`
		ORDER BY seq DESC LIMIT $4 OFFSET $5`, sandboxID, f.Type, f.SuccessOnly, sqlLimit(int64(f.Limit)), max(f.Offset, 0))
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
	e, err := scanExecution(st.pool.QueryRow(ctx, `UPDATE executions SET
		description = COALESCE($1, description), tags = COALESCE($2, tags), notes = COALESCE($3, notes)
		WHERE sandbox_id = $4 AND id = $5 RETURNING `+executionColumns,
		n.Description, n.Tags, n.Notes, sandboxID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("annotate execution %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("annotate execution: %w", err)
	}
	return e, nil
}

func scanExecution(row pgx.Row) (*store.Execution, error) {
	var e store.Execution
	if err := row.Scan(&e.Seq, &e.ID, &e.SandboxID, &e.Type, &e.Code, &e.Success, &e.ExecutionTimeMs, &e.Output,
		&e.Error, &e.Description, &e.Tags, &e.Notes, &e.CreatedAt); err != nil {
		return nil, err
	}
	e.CreatedAt = e.CreatedAt.UTC()
	return &e, nil
}
