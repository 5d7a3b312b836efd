package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// sandboxColumns lists the columns scanSandbox reads, in its order.
const sandboxColumns = `id, backend, profile, state, reason, image, spec, metadata,
	entrypoint, created_at, updated_at, expires_at, idle_timeout, last_active_at,
	provider_state, pool, instance, owner_id, org_id, version`

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// scanSandbox reads one row of sandboxColumns.
func scanSandbox(row rowScanner) (*store.Sandbox, error) {
	var (
		s                            store.Sandbox
		state, metadata              string
		entrypoint                   sql.NullString
		created, updated, lastActive int64
		expires                      sql.NullInt64
		idle                         int64
	)
	if err := row.Scan(&s.ID, &s.Backend, &s.Profile, &state, &s.Reason, &s.Image,
		&s.Spec, &metadata, &entrypoint, &created, &updated, &expires, &idle,
		&lastActive, &s.ProviderState, &s.Pool, &s.Instance, &s.OwnerID, &s.OrgID,
		&s.Version); err != nil {
		return nil, err
	}
	var err error
	if s.Metadata, err = decodeMetadata(metadata); err != nil {
		return nil, err
	}
	if s.Entrypoint, err = decodeEntrypoint(entrypoint); err != nil {
		return nil, err
	}
	s.State = sandbox.State(state)
	s.CreatedAt = fromMicros(created)
	s.UpdatedAt = fromMicros(updated)
	s.ExpiresAt = fromNullMicros(expires)
	s.IdleTimeout = time.Duration(idle)
	s.LastActiveAt = fromMicros(lastActive)
	return &s, nil
}

// sandboxArgs returns the values of every column of sandboxColumns after id
// and before version, in order.
func sandboxArgs(s *store.Sandbox) ([]any, error) {
	metadata, err := encodeMetadata(s.Metadata)
	if err != nil {
		return nil, err
	}
	entrypoint, err := encodeEntrypoint(s.Entrypoint)
	if err != nil {
		return nil, err
	}
	return []any{s.Backend, s.Profile, string(s.State), s.Reason, s.Image, s.Spec,
		metadata, entrypoint, micros(s.CreatedAt), micros(s.UpdatedAt),
		nullMicros(s.ExpiresAt), int64(s.IdleTimeout), micros(s.LastActiveAt),
		s.ProviderState, s.Pool, s.Instance, s.OwnerID, s.OrgID}, nil
}

// CreateSandbox inserts s with Version 1, first setting a zero CreatedAt to
// now and a zero UpdatedAt to CreatedAt in s. ErrConflict if the id exists.
func (st *Store) CreateSandbox(ctx context.Context, s *store.Sandbox) error {
	s.CreatedAt = nowIfZero(s.CreatedAt)
	if s.UpdatedAt.IsZero() {
		s.UpdatedAt = s.CreatedAt
	}
	args, err := sandboxArgs(s)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
		ON CONFLICT (id) DO NOTHING`, append([]any{s.ID}, args...)...)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	} else if n == 0 {
		return fmt.Errorf("create sandbox %s: %w", s.ID, store.ErrConflict)
	}
	if err := putMetadata(ctx, tx, s.ID, s.Metadata); err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	s.Version = 1
	return nil
}

// putMetadata replaces the filterable metadata rows of sandbox id.
func putMetadata(ctx context.Context, tx *sql.Tx, id string, m map[string]string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_metadata WHERE sandbox_id = ?`, id); err != nil {
		return fmt.Errorf("put metadata: %w", err)
	}
	for k, v := range m {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO sandbox_metadata (sandbox_id, key, value) VALUES (?, ?, ?)`, id, k, v); err != nil {
			return fmt.Errorf("put metadata: %w", err)
		}
	}
	return nil
}

// GetSandbox returns the record or ErrNotFound.
func (st *Store) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	s, err := scanSandbox(st.r.QueryRowContext(ctx,
		`SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get sandbox %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox: %w", err)
	}
	return s, nil
}

// UpdateSandbox replaces the record if its stored Version equals s.Version,
// then increments s.Version; ErrConflict otherwise, ErrNotFound if it is gone.
func (st *Store) UpdateSandbox(ctx context.Context, s *store.Sandbox) error {
	args, err := sandboxArgs(s)
	if err != nil {
		return fmt.Errorf("update sandbox: %w", err)
	}
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("update sandbox: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET backend = ?, profile = ?,
		state = ?, reason = ?, image = ?, spec = ?, metadata = ?, entrypoint = ?,
		created_at = ?, updated_at = ?, expires_at = ?, idle_timeout = ?,
		last_active_at = ?, provider_state = ?, pool = ?, instance = ?, owner_id = ?,
		org_id = ?, version = version + 1
		WHERE id = ? AND version = ?`, append(args, s.ID, s.Version)...)
	if err != nil {
		return fmt.Errorf("update sandbox: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("update sandbox: %w", err)
	}
	if n == 0 {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM sandboxes WHERE id = ?`, s.ID).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("update sandbox %s: %w", s.ID, store.ErrNotFound)
		case err != nil:
			return fmt.Errorf("update sandbox: %w", err)
		}
		return fmt.Errorf("update sandbox %s version %d: %w", s.ID, s.Version, store.ErrConflict)
	}
	if err := putMetadata(ctx, tx, s.ID, s.Metadata); err != nil {
		return fmt.Errorf("update sandbox: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("update sandbox: %w", err)
	}
	s.Version++
	return nil
}

// DeleteSandbox removes the record and its metadata rows; ErrNotFound if
// absent. Its events are kept.
func (st *Store) DeleteSandbox(ctx context.Context, id string) error {
	return st.execOne(ctx, "delete sandbox", id, store.ErrNotFound, `DELETE FROM sandboxes WHERE id = ?`, id)
}

// listWhere returns the WHERE clause (with a leading space, or empty) that
// selects the sandboxes, aliased s, matching f, and its arguments.
func listWhere(f store.ListFilter) (string, []any) {
	var conds []string
	var args []any
	if len(f.States) > 0 {
		conds = append(conds, "s.state IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(f.States)), ", ")+")")
		for _, state := range f.States {
			args = append(args, string(state))
		}
	}
	if f.Backend != "" {
		conds = append(conds, "s.backend = ?")
		args = append(args, f.Backend)
	}
	if f.Instance != "" {
		conds = append(conds, "s.instance = ?")
		args = append(args, f.Instance)
	}
	if f.OwnerID != "" {
		conds = append(conds, "s.owner_id = ?")
		args = append(args, f.OwnerID)
	}
	for _, k := range slices.Sorted(maps.Keys(f.Metadata)) {
		conds = append(conds, `EXISTS (SELECT 1 FROM sandbox_metadata m
			WHERE m.sandbox_id = s.id AND m.key = ? AND m.value = ?)`)
		args = append(args, k, f.Metadata[k])
	}
	if f.ExpiresBefore != nil {
		conds = append(conds, "s.expires_at IS NOT NULL AND s.expires_at < ?")
		args = append(args, micros(*f.ExpiresBefore))
	}
	switch {
	case f.Pool != "":
		conds = append(conds, "s.pool = ?")
		args = append(args, f.Pool)
	case !f.AllPools:
		conds = append(conds, "s.pool = ''")
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// ListSandboxes returns the records matching f ordered by CreatedAt then ID,
// and how many match before paging. Both come from one snapshot.
func (st *Store) ListSandboxes(ctx context.Context, f store.ListFilter) ([]*store.Sandbox, int, error) {
	where, args := listWhere(f)
	tx, err := st.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("list sandboxes: %w", err)
	}
	defer tx.Rollback()
	var total int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes s`+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list sandboxes: %w", err)
	}
	q := `SELECT ` + sandboxColumns + ` FROM sandboxes s` + where + ` ORDER BY s.created_at, s.id`
	if f.PageSize > 0 {
		page := max(f.Page, 1)
		q += ` LIMIT ? OFFSET ?`
		args = append(args, f.PageSize, (page-1)*f.PageSize)
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list sandboxes: %w", err)
	}
	defer rows.Close()
	var out []*store.Sandbox
	for rows.Next() {
		s, err := scanSandbox(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("list sandboxes: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list sandboxes: %w", err)
	}
	return out, total, nil
}

// CountActive counts boxes of backend ("" = all) that are not Terminated or
// Failed.
func (st *Store) CountActive(ctx context.Context, backend string) (int, error) {
	var n int
	err := st.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes
		WHERE state NOT IN (?, ?) AND (? = '' OR backend = ?) AND pool = ''`,
		string(sandbox.StateTerminated), string(sandbox.StateFailed), backend, backend).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count active sandboxes: %w", err)
	}
	return n, nil
}

// ClaimPooled takes the oldest Running member of pool out of it (one
// statement, so concurrent claims never share a box); ErrNotFound when the
// pool has none.
func (st *Store) ClaimPooled(ctx context.Context, pool string) (*store.Sandbox, error) {
	if pool == "" {
		return nil, fmt.Errorf("claim pooled: empty pool: %w", store.ErrNotFound)
	}
	s, err := scanSandbox(st.w.QueryRowContext(ctx, `UPDATE sandboxes SET pool = '', version = version + 1
		WHERE id = (SELECT id FROM sandboxes WHERE pool = ? AND state = ?
			ORDER BY created_at, id LIMIT 1)
		RETURNING `+sandboxColumns, pool, string(sandbox.StateRunning)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("claim from pool %s: %w", pool, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("claim pooled: %w", err)
	}
	return s, nil
}
