package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// sandboxColumns lists the columns scanSandbox reads, in its order.
const sandboxColumns = `id, backend, profile, state, reason, image, spec, metadata,
	entrypoint, created_at, updated_at, expires_at, idle_timeout, last_active_at,
	provider_state, pool, instance, owner_id, org_id, version`

// scanSandbox reads one row of sandboxColumns.
func scanSandbox(row pgx.Row) (*store.Sandbox, error) {
	var (
		s       store.Sandbox
		state   string
		expires *time.Time
		idle    int64
	)
	if err := row.Scan(&s.ID, &s.Backend, &s.Profile, &state, &s.Reason, &s.Image,
		&s.Spec, &s.Metadata, &s.Entrypoint, &s.CreatedAt, &s.UpdatedAt, &expires,
		&idle, &s.LastActiveAt, &s.ProviderState, &s.Pool, &s.Instance, &s.OwnerID, &s.OrgID,
		&s.Version); err != nil {
		return nil, err
	}
	if s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	s.State = sandbox.State(state)
	s.CreatedAt = s.CreatedAt.UTC()
	s.UpdatedAt = s.UpdatedAt.UTC()
	if expires != nil {
		t := expires.UTC()
		s.ExpiresAt = &t
	}
	s.IdleTimeout = time.Duration(idle)
	s.LastActiveAt = s.LastActiveAt.UTC()
	return &s, nil
}

// sandboxArgs returns the values of every column of sandboxColumns after id
// and before version, in order.
func sandboxArgs(s *store.Sandbox) []any {
	metadata := s.Metadata
	if metadata == nil {
		metadata = map[string]string{}
	}
	var entrypoint []string
	if len(s.Entrypoint) > 0 {
		entrypoint = s.Entrypoint
	}
	return []any{s.Backend, s.Profile, string(s.State), s.Reason, s.Image, s.Spec,
		metadata, entrypoint, s.CreatedAt, s.UpdatedAt, s.ExpiresAt,
		int64(s.IdleTimeout), s.LastActiveAt, s.ProviderState, s.Pool, s.Instance,
		s.OwnerID, s.OrgID}
}

// CreateSandbox inserts s with Version 1, first setting a zero CreatedAt to
// now and a zero UpdatedAt to CreatedAt in s. ErrConflict if the id exists.
func (st *Store) CreateSandbox(ctx context.Context, s *store.Sandbox) error {
	s.CreatedAt = nowIfZero(s.CreatedAt)
	if s.UpdatedAt.IsZero() {
		s.UpdatedAt = s.CreatedAt
	}
	tag, err := st.pool.Exec(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
			$18, $19, 1)
		ON CONFLICT (id) DO NOTHING`, append([]any{s.ID}, sandboxArgs(s)...)...)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create sandbox %s: %w", s.ID, store.ErrConflict)
	}
	s.Version = 1
	return nil
}

// GetSandbox returns the record or ErrNotFound.
func (st *Store) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	s, err := scanSandbox(st.pool.QueryRow(ctx,
		`SELECT `+sandboxColumns+` FROM sandboxes WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get sandbox %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox: %w", err)
	}
	return s, nil
}

// UpdateSandbox replaces the record if its stored Version equals s.Version,
// then increments s.Version; ErrConflict otherwise, ErrNotFound if it is gone.
// Of concurrent updates from one Version the row lock lets exactly one pass.
func (st *Store) UpdateSandbox(ctx context.Context, s *store.Sandbox) error {
	tag, err := st.pool.Exec(ctx, `UPDATE sandboxes SET backend = $1, profile = $2,
		state = $3, reason = $4, image = $5, spec = $6, metadata = $7, entrypoint = $8,
		created_at = $9, updated_at = $10, expires_at = $11, idle_timeout = $12,
		last_active_at = $13, provider_state = $14, pool = $15, instance = $16, owner_id = $17,
		org_id = $18, version = version + 1
		WHERE id = $19 AND version = $20`, append(sandboxArgs(s), s.ID, s.Version)...)
	if err != nil {
		return fmt.Errorf("update sandbox: %w", err)
	}
	if tag.RowsAffected() == 0 {
		var exists bool
		if err := st.pool.QueryRow(ctx,
			`SELECT EXISTS (SELECT 1 FROM sandboxes WHERE id = $1)`, s.ID).Scan(&exists); err != nil {
			return fmt.Errorf("update sandbox: %w", err)
		}
		if !exists {
			return fmt.Errorf("update sandbox %s: %w", s.ID, store.ErrNotFound)
		}
		return fmt.Errorf("update sandbox %s version %d: %w", s.ID, s.Version, store.ErrConflict)
	}
	s.Version++
	return nil
}

// DeleteSandbox removes the record; ErrNotFound if absent. Its events are
// kept.
func (st *Store) DeleteSandbox(ctx context.Context, id string) error {
	tag, err := st.pool.Exec(ctx, `DELETE FROM sandboxes WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete sandbox: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete sandbox %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// listWhere returns the WHERE clause (with a leading space, or empty) that
// selects the sandboxes matching f, and its arguments.
func listWhere(f store.ListFilter) (string, []any) {
	var conds []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, s := range f.States {
			states[i] = string(s)
		}
		conds = append(conds, "state = ANY("+arg(states)+")")
	}
	if f.Backend != "" {
		conds = append(conds, "backend = "+arg(f.Backend))
	}
	if f.Instance != "" {
		conds = append(conds, "instance = "+arg(f.Instance))
	}
	if f.OwnerID != "" {
		conds = append(conds, "owner_id = "+arg(f.OwnerID))
	}
	if len(f.Metadata) > 0 {
		// Containment: every pair of the filter is in the record's object.
		conds = append(conds, "metadata @> "+arg(f.Metadata))
	}
	if f.ExpiresBefore != nil {
		conds = append(conds, "expires_at IS NOT NULL AND expires_at < "+arg(*f.ExpiresBefore))
	}
	switch {
	case f.Pool != "":
		conds = append(conds, "pool = "+arg(f.Pool))
	case !f.AllPools:
		conds = append(conds, "pool = ''")
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
	var (
		out   []*store.Sandbox
		total int
	)
	err := pgx.BeginTxFunc(ctx, st.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM sandboxes`+where, args...).Scan(&total); err != nil {
				return err
			}
			q := `SELECT ` + sandboxColumns + ` FROM sandboxes` + where + ` ORDER BY created_at, id`
			if f.PageSize > 0 {
				page := max(f.Page, 1)
				q += fmt.Sprintf(` LIMIT %d OFFSET %d`, f.PageSize, (page-1)*f.PageSize)
			}
			rows, err := tx.Query(ctx, q, args...)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Sandbox, error) {
				return scanSandbox(row)
			})
			return err
		})
	if err != nil {
		return nil, 0, fmt.Errorf("list sandboxes: %w", err)
	}
	return out, total, nil
}

// CountActive counts boxes of backend ("" = all) that are not Terminated or
// Failed.
func (st *Store) CountActive(ctx context.Context, backend string) (int, error) {
	var n int
	err := st.pool.QueryRow(ctx, `SELECT COUNT(*) FROM sandboxes
		WHERE state <> ALL($1) AND ($2 = '' OR backend = $2) AND pool = ''`,
		[]string{string(sandbox.StateTerminated), string(sandbox.StateFailed)}, backend).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count active sandboxes: %w", err)
	}
	return n, nil
}

// ClaimPooled takes the oldest Running member of pool out of it. Rows
// another claim holds are skipped, and the outer condition re-checks the
// pool, so concurrent claims never share a box; ErrNotFound when the pool
// has none.
func (st *Store) ClaimPooled(ctx context.Context, pool string) (*store.Sandbox, error) {
	if pool == "" {
		return nil, fmt.Errorf("claim pooled: empty pool: %w", store.ErrNotFound)
	}
	s, err := scanSandbox(st.pool.QueryRow(ctx, `UPDATE sandboxes SET pool = '', version = version + 1
		WHERE pool = $1 AND id = (SELECT id FROM sandboxes WHERE pool = $1 AND state = $2
			ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+sandboxColumns, pool, string(sandbox.StateRunning)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("claim from pool %s: %w", pool, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("claim pooled: %w", err)
	}
	return s, nil
}
