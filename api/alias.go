package api

import "github.com/astrabox/astrabox/api/wire"

// The server speaks the shapes of package wire.
type (
	CreateSandboxRequest  = wire.CreateSandboxRequest
	Sandbox               = wire.Sandbox
	SandboxStatus         = wire.SandboxStatus
	ImageSpec             = wire.ImageSpec
	NetworkPolicy         = wire.NetworkPolicy
	PaginationInfo        = wire.PaginationInfo
	ListSandboxesResponse = wire.ListSandboxesResponse
	RenewRequest          = wire.RenewRequest
	RenewResponse         = wire.RenewResponse
	Endpoint              = wire.Endpoint
	ErrorResponse         = wire.ErrorResponse
)
