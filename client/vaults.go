package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/astrabox/astrabox/platform/wire"
)

// Credential vaults (/api/v1/vaults): named sets of secrets assigned to
// Agents (AgentRequest.VaultIDs). A Session's box gets a placeholder per
// secret, in an environment variable of the secret's name, and the egress
// proxy puts the real value only into requests to the secret's
// destination. Values are write-only: the server never returns one.

type (
	// Vault is a stored vault; its secrets come without their values.
	Vault = wire.Vault
	// VaultSecret is a stored secret: its variable and destination.
	VaultSecret = wire.VaultSecret
	// VaultRequest creates a vault (with Secrets, each with its value) or
	// replaces one's Name and Description (without Secrets; a non-nil
	// Version changes only that version, else VERSION_CONFLICT).
	VaultRequest = wire.VaultRequest
	// Secret is a secret as written: Name is the environment variable
	// that holds its placeholder in a box; Value (required) goes only to
	// its destination (see wire.SecretRequest). String, GoString and
	// LogValue never show Value.
	Secret = wire.SecretRequest
)

// CreateVault stores a new vault.
func (c *Client) CreateVault(ctx context.Context, req VaultRequest) (Vault, error) {
	var out Vault
	err := c.apiJSON(ctx, http.MethodPost, "/vaults", nil, req, &out, nil)
	return out, err
}

// GetVault returns a vault (VAULT_NOT_FOUND if none).
func (c *Client) GetVault(ctx context.Context, id string) (Vault, error) {
	var out Vault
	err := c.apiJSON(ctx, http.MethodGet, "/vaults/"+url.PathEscape(id), nil, nil, &out, nil)
	return out, err
}

// ListVaults returns a page of vaults, oldest first.
func (c *Client) ListVaults(ctx context.Context, page PageOptions) (Page[Vault], error) {
	var out Page[Vault]
	err := c.apiJSON(ctx, http.MethodGet, "/vaults", page.query(), nil, &out, nil)
	return out, err
}

// UpdateVault replaces a vault's name and description; its secrets stay.
func (c *Client) UpdateVault(ctx context.Context, id string, req VaultRequest) (Vault, error) {
	if req.Secrets != nil {
		return Vault{}, errors.New("update vault: secrets are written with PutSecret")
	}
	var out Vault
	err := c.apiJSON(ctx, http.MethodPut, "/vaults/"+url.PathEscape(id), nil, req, &out, nil)
	return out, err
}

// DeleteVault removes a vault (VAULT_IN_USE while an Agent names it).
func (c *Client) DeleteVault(ctx context.Context, id string) error {
	return c.apiJSON(ctx, http.MethodDelete, "/vaults/"+url.PathEscape(id), nil, nil, nil, nil)
}

// PutSecret creates or replaces the secret s.Name of vault id, value
// included, and returns the vault.
func (c *Client) PutSecret(ctx context.Context, id string, s Secret) (Vault, error) {
	if s.Name == "" {
		return Vault{}, errors.New("put secret: a name is required")
	}
	var out Vault
	err := c.apiJSON(ctx, http.MethodPut, "/vaults/"+url.PathEscape(id)+"/secrets/"+url.PathEscape(s.Name), nil, s, &out, nil)
	return out, err
}

// DeleteSecret removes secret name of vault id.
func (c *Client) DeleteSecret(ctx context.Context, id, name string) error {
	return c.apiJSON(ctx, http.MethodDelete, "/vaults/"+url.PathEscape(id)+"/secrets/"+url.PathEscape(name), nil, nil, nil, nil)
}
