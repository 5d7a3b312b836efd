package store

import (
	"context"
	"time"
)

// Execution is one recorded run of code in a sandbox (a shell command or a
// python cell run through the Shipyard-compatible API): what ran, how it
// ended and the notes a client added later. A sandbox's executions go when
// its record is deleted.
type Execution struct {
	// ID is unique per store; Seq orders a store's executions as they
	// were appended (set by AppendExecution).
	ID        string
	Seq       int64
	SandboxID string
	// Type is "shell" or "python".
	Type            string
	Code            string
	Success         bool
	ExecutionTimeMs int64
	Output          string
	// Error, Description, Tags and Notes are nil when absent.
	Error       *string
	Description *string
	Tags        *string
	Notes       *string
	CreatedAt   time.Time
}

// ExecutionFilter selects executions of one sandbox. Zero fields select
// everything.
type ExecutionFilter struct {
	Type        string
	SuccessOnly bool
	// Limit bounds the answer (0: no bound); Offset skips that many of the
	// newest first.
	Limit, Offset int
}

// ExecutionNotes changes the notes of an execution: nil fields keep theirs.
type ExecutionNotes struct {
	Description *string
	Tags        *string
	Notes       *string
}

// Executions keeps the execution history of sandboxes.
type Executions interface {
	// AppendExecution stores e (a zero CreatedAt is set to now) and sets
	// e.Seq. ErrConflict when e.ID exists; ErrNotFound when the sandbox
	// e.SandboxID has no record.
	AppendExecution(ctx context.Context, e *Execution) error
	// GetExecution returns execution id of sandbox sandboxID, or
	// ErrNotFound.
	GetExecution(ctx context.Context, sandboxID, id string) (*Execution, error)
	// ListExecutions returns the matching executions of sandboxID, newest
	// (highest Seq) first, and how many match before Limit and Offset.
	ListExecutions(ctx context.Context, sandboxID string, f ExecutionFilter) ([]*Execution, int, error)
	// AnnotateExecution applies n to execution id of sandboxID and returns
	// it as stored; ErrNotFound when absent.
	AnnotateExecution(ctx context.Context, sandboxID, id string, n ExecutionNotes) (*Execution, error)
}
