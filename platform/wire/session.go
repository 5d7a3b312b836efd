package wire

// SessionState is a Session's state (PLATFORM.md: "Session states").
type SessionState string

// The Session states.
const (
	// SessionCreating: its runtime (sandbox and program) is being built.
	SessionCreating SessionState = "CREATING"
	// SessionReady: the program waits for input.
	SessionReady SessionState = "READY"
	// SessionBusy: a reply is in progress.
	SessionBusy SessionState = "BUSY"
	// SessionInterrupting: an interrupt was asked and the reply not yet
	// ended.
	SessionInterrupting SessionState = "INTERRUPTING"
	// SessionRecoveryRequired: the runtime could not be built or resumed.
	SessionRecoveryRequired SessionState = "RECOVERY_REQUIRED"
	// SessionTerminated: the runtime was released; the next input builds
	// it again.
	SessionTerminated SessionState = "TERMINATED"
	// SessionDeleted: the Session is deleted.
	SessionDeleted SessionState = "DELETED"
)

// Decision is an approval's answer.
type Decision string

// The decisions of an approval.
const (
	DecisionApprove Decision = "approve"
	DecisionReject  Decision = "reject"
)

// SessionStates lists every Session state, in the order of their
// definition.
var SessionStates = []SessionState{SessionCreating, SessionReady, SessionBusy, SessionInterrupting,
	SessionRecoveryRequired, SessionTerminated, SessionDeleted}
