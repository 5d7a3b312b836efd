// Package wire holds the JSON shapes of the lifecycle API, shared by the
// server (package api) and the Go SDK (package client).
package wire

import "time"

// Shapes of the lifecycle API (OpenSandbox sandbox-lifecycle.yml).
// Fields the specification does not define are AstraBox additions, marked.

// ImageSpec names the image of a sandbox.
type ImageSpec struct {
	URI  string     `json:"uri"`
	Auth *ImageAuth `json:"auth,omitempty"`
}

// ImageAuth holds registry credentials.
type ImageAuth struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// PlatformSpec constrains the OS and architecture.
type PlatformSpec struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// NetworkRule is one egress rule.
type NetworkRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// NetworkPolicy is the egress policy of a sandbox.
type NetworkPolicy struct {
	DefaultAction string        `json:"defaultAction,omitempty"`
	Egress        []NetworkRule `json:"egress,omitempty"`
}

// CreateSandboxRequest is the body of POST /sandboxes.
type CreateSandboxRequest struct {
	Image          *ImageSpec        `json:"image,omitempty"`
	SnapshotID     string            `json:"snapshotId,omitempty"`
	Platform       *PlatformSpec     `json:"platform,omitempty"`
	Timeout        *int64            `json:"timeout"` // seconds; null: no expiry
	ResourceLimits map[string]string `json:"resourceLimits,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Entrypoint     []string          `json:"entrypoint,omitempty"`
	NetworkPolicy  *NetworkPolicy    `json:"networkPolicy,omitempty"`
	SecureAccess   bool              `json:"secureAccess,omitempty"`
	Volumes        []any             `json:"volumes,omitempty"`
	Extensions     map[string]string `json:"extensions,omitempty"`
	// IdleTimeout (addition): seconds without API or proxy activity after
	// which the sandbox is deleted.
	IdleTimeout *int64 `json:"idleTimeout,omitempty"`
	// Backend (addition) selects an enabled backend.
	Backend string `json:"backend,omitempty"`
}

// SandboxStatus is the state of a sandbox.
type SandboxStatus struct {
	State            string    `json:"state"`
	Reason           string    `json:"reason,omitempty"`
	Message          string    `json:"message,omitempty"`
	LastTransitionAt time.Time `json:"lastTransitionAt"`
}

// Sandbox is the record of a sandbox.
type Sandbox struct {
	ID         string            `json:"id"`
	Image      *ImageSpec        `json:"image,omitempty"`
	Status     SandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	UpdatedAt  time.Time         `json:"updatedAt,omitempty"`
	// Backend, Profile and IdleTimeout are additions.
	Backend     string `json:"backend,omitempty"`
	Profile     string `json:"profile,omitempty"`
	IdleTimeout int64  `json:"idleTimeout,omitempty"`
}

// PaginationInfo describes a page of a list.
type PaginationInfo struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"pageSize"`
	TotalItems  int  `json:"totalItems"`
	TotalPages  int  `json:"totalPages"`
	HasNextPage bool `json:"hasNextPage"`
}

// ListSandboxesResponse is a page of sandboxes.
type ListSandboxesResponse struct {
	Items      []Sandbox      `json:"items"`
	Pagination PaginationInfo `json:"pagination"`
}

// RenewRequest is the body of POST /sandboxes/{id}/renew-expiration.
type RenewRequest struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// RenewResponse answers a renewal.
type RenewResponse struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// Endpoint is how to reach a port of a sandbox: a URL without scheme, and
// headers every request must carry.
type Endpoint struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers,omitempty"`
	// ExpiresAt (addition) is when the credential in Headers stops working.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// StateEvent (addition) is one state transition on
// GET /v1/sandboxes/{id}/events.
type StateEvent struct {
	Seq       int64     `json:"seq"`
	SandboxID string    `json:"sandboxId"`
	State     string    `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at"`
}
