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
	// CredentialProxy enables the sandbox's Credential Vault (the egress
	// API's /credential-vault); it needs NetworkPolicy.
	CredentialProxy *CredentialProxyConfig `json:"credentialProxy,omitempty"`
	SecureAccess    bool                   `json:"secureAccess,omitempty"`
	Volumes         []Volume               `json:"volumes,omitempty"`
	Extensions      map[string]string      `json:"extensions,omitempty"`
	// IdleTimeout (addition): seconds without API or proxy activity after
	// which the sandbox is deleted.
	IdleTimeout *int64 `json:"idleTimeout,omitempty"`
	// Backend (addition) selects an enabled backend.
	Backend string `json:"backend,omitempty"`
}

// CredentialProxyConfig is OpenSandbox's credentialProxy of a create
// request.
type CredentialProxyConfig struct {
	Enabled bool `json:"enabled"`
}

// Volume is a storage mount of a sandbox: exactly one of Host, PVC and
// OSSFS (which AstraBox refuses) names its source.
type Volume struct {
	Name      string         `json:"name"`
	Host      *HostVolume    `json:"host,omitempty"`
	PVC       *PVCVolume     `json:"pvc,omitempty"`
	OSSFS     map[string]any `json:"ossfs,omitempty"`
	MountPath string         `json:"mountPath"`
	ReadOnly  bool           `json:"readOnly,omitempty"`
	SubPath   string         `json:"subPath,omitempty"`
}

// HostVolume is a host directory under a root the server allows.
type HostVolume struct {
	Path string `json:"path"`
}

// PVCVolume is a named volume of the backend, created on first use
// unless CreateIfNotExists is false. The Kubernetes provisioning hints
// (StorageClass, Storage, AccessModes) are accepted and ignored, as
// OpenSandbox's Docker runtime does.
type PVCVolume struct {
	ClaimName                  string   `json:"claimName"`
	CreateIfNotExists          *bool    `json:"createIfNotExists,omitempty"`
	DeleteOnSandboxTermination bool     `json:"deleteOnSandboxTermination,omitempty"`
	StorageClass               *string  `json:"storageClass,omitempty"`
	Storage                    *string  `json:"storage,omitempty"`
	AccessModes                []string `json:"accessModes,omitempty"`
}

// VolumeInfo (addition) describes a named volume: GET /v1/volumes.
type VolumeInfo struct {
	Name      string     `json:"name"`
	Backend   string     `json:"backend"`
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	// InUse lists the sandboxes that mount it now.
	InUse []string `json:"inUse,omitempty"`
}

// ListVolumesResponse (addition) is every named volume.
type ListVolumesResponse struct {
	Items []VolumeInfo `json:"items"`
}

// CreateSnapshotRequest is the optional body of POST
// /sandboxes/{id}/snapshots.
type CreateSnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// SnapshotStatus is the state of a snapshot: Creating, Ready, Failed or
// Deleting (AstraBox answers Ready: it captures before it answers).
type SnapshotStatus struct {
	State            string     `json:"state"`
	Reason           string     `json:"reason,omitempty"`
	Message          string     `json:"message,omitempty"`
	LastTransitionAt *time.Time `json:"lastTransitionAt,omitempty"`
}

// Snapshot is a point-in-time capture of a sandbox.
type Snapshot struct {
	ID        string         `json:"id"`
	SandboxID string         `json:"sandboxId"`
	Name      string         `json:"name,omitempty"`
	Status    SnapshotStatus `json:"status"`
	CreatedAt time.Time      `json:"createdAt"`
}

// ListSnapshotsResponse is a page of snapshots.
type ListSnapshotsResponse struct {
	Items      []Snapshot     `json:"items"`
	Pagination PaginationInfo `json:"pagination"`
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
