// Package platform is AstraBox's agent platform, in two parts: the
// Catalog (Agents, the platform fields of RuntimeProfiles, credential
// vaults, model keys, installed engines), which the runner reads when it
// builds a Session's runtime, and the Sessions front (conversations,
// inputs with receipts, interrupts, answers, deletes, reply and message
// reads), which drives the runner through its Runtimes. A Session's output
// lives in its durable log (store/streamlog); the program that answers
// runs under platform/runner. The wire contract is PLATFORM.md as served in
// the project's OpenAPI document.
//
// Both parts authorize: their methods act for the caller their ctx
// carries (identity.PrincipalFrom) and show or change only what it may
// (access.go). An administrator may do everything; a member sees and
// manages its own Agents, uses those shared with it, and sees only its
// own Sessions; a record it may not see answers as a missing one would
// (AGENT_NOT_FOUND, SESSION_NOT_FOUND), one it sees but may not change
// FORBIDDEN. A ctx without a principal is an internal caller (the runner,
// the server's start-up work) with full access; the API always puts one
// in.
package platform

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// The platform's error codes (PLATFORM.md); their HTTP statuses are
// registered in the one table (sandbox.RegisterStatus) with the package.
const (
	CodeAgentNotFound      sandbox.Code = "AGENT_NOT_FOUND"
	CodeSessionNotFound    sandbox.Code = "SESSION_NOT_FOUND"
	CodeProfileNotFound    sandbox.Code = "PROFILE_NOT_FOUND"
	CodeInvalid            sandbox.Code = "INVALID_REQUEST"
	CodeSessionBusy        sandbox.Code = "SESSION_BUSY"
	CodeVersionConflict    sandbox.Code = "VERSION_CONFLICT"
	CodeInteractionClosed  sandbox.Code = "INTERACTION_CLOSED"
	CodeEngineNotInstalled sandbox.Code = "ENGINE_NOT_INSTALLED"
	CodeSessionDeleted     sandbox.Code = "SESSION_DELETED"
	// Credential vaults (vaults.go) and their delivery into Sessions.
	CodeVaultNotFound       sandbox.Code = "VAULT_NOT_FOUND"
	CodeSecretNotFound      sandbox.Code = "VAULT_SECRET_NOT_FOUND"
	CodeVaultInUse          sandbox.Code = "VAULT_IN_USE"
	CodeDeliveryUnsupported sandbox.Code = "PROTECTED_DELIVERY_UNSUPPORTED"
)

func init() { sandbox.RegisterStatuses(statusByCode) }

// statusByCode are the HTTP statuses of the platform's codes.
var statusByCode = map[sandbox.Code]int{
	CodeAgentNotFound:       http.StatusNotFound,
	CodeSessionNotFound:     http.StatusNotFound,
	CodeProfileNotFound:     http.StatusNotFound,
	CodeInvalid:             http.StatusBadRequest,
	CodeSessionBusy:         http.StatusConflict,
	CodeVersionConflict:     http.StatusConflict,
	CodeInteractionClosed:   http.StatusConflict,
	CodeEngineNotInstalled:  http.StatusBadRequest,
	CodeSessionDeleted:      http.StatusGone,
	CodeVaultNotFound:       http.StatusNotFound,
	CodeSecretNotFound:      http.StatusNotFound,
	CodeVaultInUse:          http.StatusConflict,
	CodeDeliveryUnsupported: http.StatusBadRequest,
}

// NewID returns prefix + "_" + 24 lower-case base32 characters; ids of one
// kind made later sort after earlier ones within a millisecond's clock
// precision (a time prefix), so lists page in creation order.
func NewID(prefix string, now time.Time) string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 7; i >= 0; i-- { // 8 characters of time: 40 bits of ms
		b[i] = alphabet[ms&31]
		ms >>= 5
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	for i := 0; i < 8; i++ {
		b[8+i] = alphabet[r[i]&31]
	}
	return fmt.Sprintf("%s_%s", prefix, b[:])
}

// stamp is t as records keep it: UTC, in microseconds.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// invalid returns an INVALID_REQUEST error.
func invalid(format string, args ...any) error { return sandbox.Errorf(CodeInvalid, format, args...) }
