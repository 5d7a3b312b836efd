package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store"
)

// agentColumns lists the columns scanAgent reads, in its order.
const agentColumns = `id, name, engine_kind, runtime_profile, model, instructions,
	permission_mode, tools, vault_ids, visibility, allowed_user_ids, admins, owner_id,
	org_id, version, created_at, updated_at`

// scanAgent reads one row of agentColumns.
func scanAgent(row rowScanner) (*store.Agent, error) {
	var (
		a                              store.Agent
		tools, vaults, allowed, admins sql.NullString
		created, updated               int64
	)
	if err := row.Scan(&a.ID, &a.Name, &a.EngineKind, &a.RuntimeProfile, &a.Model,
		&a.Instructions, &a.PermissionMode, &tools, &vaults, &a.Visibility, &allowed, &admins,
		&a.OwnerID, &a.OrgID, &a.Version, &created, &updated); err != nil {
		return nil, err
	}
	var err error
	if a.Tools, err = decodeStrings(tools); err != nil {
		return nil, err
	}
	if a.VaultIDs, err = decodeStrings(vaults); err != nil {
		return nil, err
	}
	if a.AllowedUserIDs, err = decodeStrings(allowed); err != nil {
		return nil, err
	}
	if a.Admins, err = decodeStrings(admins); err != nil {
		return nil, err
	}
	a.CreatedAt = fromMicros(created)
	a.UpdatedAt = fromMicros(updated)
	return &a, nil
}

// agentArgs returns the values of the columns of agentColumns from name to
// admins, in order: those UpdateAgent replaces.
func agentArgs(a *store.Agent) ([]any, error) {
	var lists [4]sql.NullString // tools, vault_ids, allowed_user_ids, admins
	for i, l := range [][]string{a.Tools, a.VaultIDs, a.AllowedUserIDs, a.Admins} {
		var err error
		if lists[i], err = encodeStrings(l); err != nil {
			return nil, err
		}
	}
	return []any{a.Name, a.EngineKind, a.RuntimeProfile, a.Model, a.Instructions,
		a.PermissionMode, lists[0], lists[1], a.Visibility, lists[2], lists[3]}, nil
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
	args, err := agentArgs(a)
	if err != nil {
		return fmt.Errorf("create agent: %w", err)
	}
	if err := st.execOne(ctx, "create agent", a.ID, store.ErrConflict, `INSERT INTO agents (`+agentColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT (id) DO NOTHING`,
		append(append([]any{a.ID}, args...), a.OwnerID, a.OrgID, micros(a.CreatedAt), micros(a.UpdatedAt))...); err != nil {
		return err
	}
	a.Version = 1
	return nil
}

// GetAgent returns the record or ErrNotFound.
func (st *Store) GetAgent(ctx context.Context, id string) (*store.Agent, error) {
	a, err := scanAgent(st.r.QueryRowContext(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
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
// ErrConflict on another version, ErrNotFound if absent.
func (st *Store) UpdateAgent(ctx context.Context, a *store.Agent) error {
	args, err := agentArgs(a)
	if err != nil {
		return fmt.Errorf("update agent: %w", err)
	}
	updated := nowIfZero(a.UpdatedAt)
	var (
		created    int64
		owner, org string
	)
	err = st.w.QueryRowContext(ctx, `UPDATE agents SET name = ?, engine_kind = ?,
		runtime_profile = ?, model = ?, instructions = ?, permission_mode = ?, tools = ?,
		vault_ids = ?, visibility = ?, allowed_user_ids = ?, admins = ?, updated_at = ?,
		version = version + 1
		WHERE id = ? AND version = ? RETURNING created_at, owner_id, org_id`,
		append(args, micros(updated), a.ID, a.Version)...).Scan(&created, &owner, &org)
	if errors.Is(err, sql.ErrNoRows) {
		return st.missOrConflict(ctx, "update agent", `SELECT 1 FROM agents WHERE id = ?`, a.ID, a.Version)
	}
	if err != nil {
		return fmt.Errorf("update agent: %w", err)
	}
	a.CreatedAt, a.UpdatedAt = fromMicros(created), updated
	a.OwnerID, a.OrgID = owner, org
	a.Version++
	return nil
}

// DeleteAgent removes the record; ErrNotFound if absent. The agent's
// sessions are kept.
func (st *Store) DeleteAgent(ctx context.Context, id string) error {
	return st.execOne(ctx, "delete agent", id, store.ErrNotFound, `DELETE FROM agents WHERE id = ?`, id)
}

// ListAgents returns up to limit records with ID > afterID ordered by ID
// (limit <= 0: all).
func (st *Store) ListAgents(ctx context.Context, afterID string, limit int) ([]*store.Agent, error) {
	return queryAll(ctx, st.r, "list agents", scanAgent, `SELECT `+agentColumns+` FROM agents
		WHERE id > ? ORDER BY id LIMIT ?`, afterID, sqlLimit(int64(limit)))
}
