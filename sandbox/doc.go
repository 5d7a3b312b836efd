// Package sandbox is the contract between the server and its backends:
// the Provider interface every backend implements (lifecycle and
// connectivity only; what happens inside a box goes through execd), the
// optional interfaces a backend may claim (Attacher, snapshots, volumes,
// image checks) with the capabilities that name them, a box's spec and
// states, and the error codes every layer answers with (errors.go). It
// imports only the standard library; sandboxtest is the conformance suite
// each backend passes.
package sandbox
