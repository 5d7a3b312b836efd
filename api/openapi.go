package api

import _ "embed"

// OpenAPI is the OpenAPI document of AstraBox's additions to the
// OpenSandbox lifecycle API, served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
