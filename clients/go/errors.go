package fenceq

import (
	"errors"
	"fmt"
)

// The codes an *Error carries. The daemon's (protocol/PROTOCOL.md, "Errors")
// come in its error replies; the client's own ("Client errors") are the same
// in every fenceq client. A refusal (a lost claim, a stale complete) is never
// an error: those calls answer false or nil.
const (
	CodeBadRequest         = "bad_request"
	CodeUnknownOp          = "unknown_op"
	CodeInvalidArgument    = "invalid_argument"
	CodeUnsupportedVersion = "unsupported_version"
	CodeUnavailable        = "unavailable"
	CodeInternal           = "internal"
	CodeOutcomeUnknown     = "outcome_unknown"

	CodeTimeout     = "timeout"
	CodeUnreachable = "unreachable"
	CodeTransport   = "transport"
	CodeBadReply    = "bad_reply"
	CodeMisuse      = "misuse"
	CodeClosed      = "closed"
	CodeLeaseLost   = "lease_lost"
)

// Error is every failure of this package: a daemon's error reply, or one of
// the client's own. Code is stable and meant for programs; Message for
// people (the daemon's names the offending field). Test a code with
// errors.Is and the sentinel of that code:
//
//	if errors.Is(err, fenceq.ErrInvalidArgument) { ... }
type Error struct {
	// Code is one of the Code* constants (or a newer daemon's code).
	Code string
	// Message says what went wrong.
	Message string
	// Op is the request's op ("claim_next"), when the error is a request's.
	Op string
	// NotSent is true when the request certainly never left the client, so
	// the daemon cannot have applied it: a refusal of the client itself
	// (invalid_argument, misuse, unreachable) or a timeout while no
	// connection to the daemon came up. A daemon's error reply and a
	// timeout after sending leave it false.
	NotSent bool

	cause error
}

func (e *Error) Error() string {
	if e.Op != "" {
		return fmt.Sprintf("fenceq: %s: %s: %s", e.Op, e.Code, e.Message)
	}
	return fmt.Sprintf("fenceq: %s: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, ErrX) true for every error of ErrX's code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Op == "" && t.Code == e.Code
}

// Unwrap gives the cause: context.DeadlineExceeded for a timeout that was
// the context's deadline, a libzmq error for a transport failure.
func (e *Error) Unwrap() error { return e.cause }

// Sentinels, one per code, for errors.Is. They carry no message.
var (
	ErrBadRequest         = &Error{Code: CodeBadRequest}
	ErrUnknownOp          = &Error{Code: CodeUnknownOp}
	ErrInvalidArgument    = &Error{Code: CodeInvalidArgument}
	ErrUnsupportedVersion = &Error{Code: CodeUnsupportedVersion}
	ErrUnavailable        = &Error{Code: CodeUnavailable}
	ErrInternal           = &Error{Code: CodeInternal}
	ErrOutcomeUnknown     = &Error{Code: CodeOutcomeUnknown}
	ErrTimeout            = &Error{Code: CodeTimeout}
	ErrUnreachable        = &Error{Code: CodeUnreachable}
	ErrTransport          = &Error{Code: CodeTransport}
	ErrBadReply           = &Error{Code: CodeBadReply}
	ErrMisuse             = &Error{Code: CodeMisuse}
	ErrClosed             = &Error{Code: CodeClosed}
	ErrLeaseLost          = &Error{Code: CodeLeaseLost}
)

// Code is err's fenceq code, or "" when err is not (and wraps no) *Error.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// invalid is the client's own invalid_argument: a bad value refused before
// anything is sent.
func invalid(op, format string, args ...interface{}) *Error {
	return &Error{Code: CodeInvalidArgument, Op: op, Message: fmt.Sprintf(format, args...), NotSent: true}
}

func badReply(op, format string, args ...interface{}) *Error {
	return &Error{Code: CodeBadReply, Op: op, Message: fmt.Sprintf(format, args...)}
}
