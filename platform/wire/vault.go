package wire

import (
	"fmt"
	"log/slog"
	"time"
)

// The wire types of the credential vaults' routes (/api/v1/vaults). A
// secret's value is write-only: it travels in a SecretRequest and never
// in an answer.

// Vault is a vault as the API shows it: its secrets without their values,
// in name order. The times are UTC.
type Vault struct {
	ID          string        `json:"vault_id"`
	Name        string        `json:"name"`
	Description string        `json:"description"`
	Secrets     []VaultSecret `json:"secrets"`
	Version     int64         `json:"version"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
}

// VaultSecret is a stored secret as the API shows it: the environment
// variable of its placeholder and its one destination, never its value.
type VaultSecret struct {
	Name       string    `json:"name"`
	Host       string    `json:"host"`
	PathPrefix string    `json:"path_prefix"`
	Header     string    `json:"header"`
	Format     string    `json:"format"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// VaultRequest is the body of POST /api/v1/vaults (a new vault, with
// Secrets, each with its value) and PUT /api/v1/vaults/{id} (Name and
// Description only; a non-nil Version updates only that version, else
// VERSION_CONFLICT).
type VaultRequest struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Secrets     []SecretRequest `json:"secrets,omitempty"`
	Version     *int64          `json:"version,omitempty"`
}

// SecretRequest is a secret as a client writes it: a member of
// VaultRequest.Secrets, or the body of PUT /api/v1/vaults/{id}/secrets/{name}
// (Name then comes from the path; one in the body must equal it). Name is
// the environment variable that holds the secret's placeholder in a box;
// Value (required every time) goes only to Host (exact, or "*.domain")
// under PathPrefix ("": any path) in Header (default Authorization) as
// Format puts it ("{value}" marks it; default "Bearer {value}" for
// Authorization, else "{value}"). Its String, GoString and LogValue never
// show Value.
type SecretRequest struct {
	Name       string `json:"name,omitempty"`
	Value      string `json:"value"`
	Host       string `json:"host"`
	PathPrefix string `json:"path_prefix,omitempty"`
	Header     string `json:"header,omitempty"`
	Format     string `json:"format,omitempty"`
}

// String shows the request without its value, for %v and %+v.
func (r SecretRequest) String() string {
	return fmt.Sprintf("{Name:%s Host:%s PathPrefix:%s Header:%s Format:%s Value:<redacted>}", r.Name, r.Host, r.PathPrefix, r.Header, r.Format)
}

// GoString shows the request without its value, for %#v.
func (r SecretRequest) GoString() string { return "wire.SecretRequest" + r.String() }

// LogValue logs the request as String shows it.
func (r SecretRequest) LogValue() slog.Value { return slog.StringValue(r.String()) }
