package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// agentColumns lists the columns scanAgent reads, in its order.
const agentColumns = `id, name, engine_kind, runtime_profile, model, instructions,
	permission_mode, tools, vault_ids, visibility, allowed_user_ids, admins, owner_id,
	org_id, version, created_at, updated_at`

// scanAgent reads one row of agentColumns. A NULL list is nil, an empty
// array an empty, non-nil list.
func scanAgent(row pgx.Row) (*store.Agent, error) {
	var a store.Agent
	if err := row.Scan(&a.ID, &a.Name, &a.EngineKind, &a.RuntimeProfile, &a.Model,
		&a.Instructions, &a.PermissionMode, &a.Tools, &a.VaultIDs, &a.Visibility,
		&a.AllowedUserIDs, &a.Admins, &a.OwnerID, &a.OrgID, &a.Version,
		&a.CreatedAt, &a.UpdatedAt); err != nil {
		return nil, err
	}
	a.CreatedAt = a.CreatedAt.UTC()
	a.UpdatedAt = a.UpdatedAt.UTC()
	return &a, nil
}

// CreateAgent inserts a with Version 1, first setting its zero CreatedAt
// and UpdatedAt to now in a; ErrConflict if the id exists.
func (st *Store) CreateAgent(ctx context.Context, a *store.Agent) error {
	now := time.Now().UTC()
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now
	}
	if a.UpdatedAt.IsZero() {
		a.UpdatedAt = now
	}
	tag, err := st.pool.Exec(ctx, `INSERT INTO agents (`+agentColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 1, $15, $16)
		ON CONFLICT (id) DO NOTHING`,
		a.ID, a.Name, a.EngineKind, a.RuntimeProfile, a.Model, a.Instructions,
		a.PermissionMode, a.Tools, a.VaultIDs, a.Visibility, a.AllowedUserIDs, a.Admins,
		a.OwnerID, a.OrgID, a.CreatedAt, a.UpdatedAt)
	if err != nil {
		return fmt.Errorf("create agent: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create agent %s: %w", a.ID, store.ErrConflict)
	}
	a.Version = 1
	return nil
}

// GetAgent returns the record or ErrNotFound.
func (st *Store) GetAgent(ctx context.Context, id string) (*store.Agent, error) {
	a, err := scanAgent(st.pool.QueryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get agent %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get agent: %w", err)
	}
	return a, nil
}

// UpdateAgent replaces the record if its stored Version equals a.Version,
// then increments a.Version; a zero UpdatedAt is set to now. CreatedAt,
// OwnerID and OrgID keep the stored values, which are written back into a.
// ErrConflict on another version, ErrNotFound if absent. Of concurrent
// updates from one Version the row lock lets exactly one pass.
func (st *Store) UpdateAgent(ctx context.Context, a *store.Agent) error {
	updated := nowIfZero(a.UpdatedAt)
	var (
		created    time.Time
		owner, org string
	)
	err := st.pool.QueryRow(ctx, `UPDATE agents SET name = $1, engine_kind = $2,
		runtime_profile = $3, model = $4, instructions = $5, permission_mode = $6,
		tools = $7, vault_ids = $8, visibility = $9, allowed_user_ids = $10, admins = $11,
		updated_at = $12, version = version + 1
		WHERE id = $13 AND version = $14 RETURNING created_at, owner_id, org_id`,
		a.Name, a.EngineKind, a.RuntimeProfile, a.Model, a.Instructions, a.PermissionMode,
		a.Tools, a.VaultIDs, a.Visibility, a.AllowedUserIDs, a.Admins, updated,
		a.ID, a.Version).Scan(&created, &owner, &org)
	if errors.Is(err, pgx.ErrNoRows) {
		return st.missOrConflict(ctx, "update agent",
			`SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1)`, a.ID, a.Version)
	}
	if err != nil {
		return fmt.Errorf("update agent: %w", err)
	}
	a.CreatedAt, a.UpdatedAt = created.UTC(), updated
	a.OwnerID, a.OrgID = owner, org
	a.Version++
	return nil
}

// DeleteAgent removes the record; ErrNotFound if absent. The agent's
// sessions are kept.
func (st *Store) DeleteAgent(ctx context.Context, id string) error {
	tag, err := st.pool.Exec(ctx, `DELETE FROM agents WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete agent: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete agent %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// ListAgents returns up to limit records with ID > afterID ordered by ID
// (limit <= 0: all).
func (st *Store) ListAgents(ctx context.Context, afterID string, limit int) ([]*store.Agent, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+agentColumns+` FROM agents
		WHERE id > $1 ORDER BY id LIMIT $2`, afterID, sqlLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Agent, error) {
		return scanAgent(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return out, nil
}
