package api

import (
	"context"
	"fmt"
	"sync"
)

// A Sentinel is an error callers match with errors.Is that carries the
// gRPC code and ErrorInfo reason of its status, so that it survives the
// wire: an error a host answered with (a *StatusError) matches every
// Sentinel of its reason. A package of its own that gives its errors a
// status (a host.Fetcher's, say) declares them with NewSentinel.
type Sentinel struct {
	msg    string
	code   Code
	reason string
	// kind is the Kind of the *CallErrors that wrap this sentinel: their
	// status is the CallError's, with its metadata. 0 for none.
	kind Kind
}

// NewSentinel returns a sentinel error with message msg whose status has
// code and reason. Declare it once, in a package variable: ToStatus knows
// every sentinel made, so that an error type whose Is method matches it
// (rather than wrapping it) gets its status too.
func NewSentinel(code Code, reason, msg string) *Sentinel {
	return newSentinel(code, reason, msg, 0)
}

var (
	sentinelsMu sync.Mutex
	sentinels   []*Sentinel
)

func newSentinel(code Code, reason, msg string, kind Kind) *Sentinel {
	s := &Sentinel{msg: msg, code: code, reason: reason, kind: kind}
	sentinelsMu.Lock()
	sentinels = append(sentinels, s)
	sentinelsMu.Unlock()
	return s
}

// SentinelOf is the outermost sentinel in err's tree: one err wraps, or
// one an error on the way claims with an Is method. Outermost, because the
// error that wraps another says what happened: an UnreachableError whose
// last attempt was refused plain HTTP is unreachable.
func SentinelOf(err error) *Sentinel {
	sentinelsMu.Lock()
	all := sentinels
	sentinelsMu.Unlock()
	return outermost(err, all)
}

func outermost(err error, all []*Sentinel) *Sentinel {
	if err == nil {
		return nil
	}
	if s, ok := err.(*Sentinel); ok {
		return s
	}
	if x, ok := err.(interface{ Is(error) bool }); ok {
		_, call := err.(*CallError)
		for _, s := range all {
			// A kind's sentinel claimed by a CallError's Is says less
			// than what the CallError wraps.
			if (s.kind == 0 || !call) && x.Is(s) {
				return s
			}
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return outermost(u.Unwrap(), all)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if s := outermost(e, all); s != nil {
				return s
			}
		}
	}
	return nil
}

func (e *Sentinel) Error() string { return e.msg }

// Code is the gRPC code of e's status.
func (e *Sentinel) Code() Code { return e.code }

// Reason is the ErrorInfo reason of e's status.
func (e *Sentinel) Reason() string { return e.reason }

// Kind is the Kind of the *CallErrors that wrap e, whose status is then
// the CallError's; 0 for none.
func (e *Sentinel) Kind() Kind { return e.kind }

var (
	// ErrNotFound is matched (errors.Is) by every error about a module,
	// component or port that does not exist, and by a *CallError of
	// KindNotFound. The error's message names what is missing.
	ErrNotFound = newSentinel(CodeNotFound, ReasonNotFound, "not found", KindNotFound)

	// ErrBusy is matched by the error of a call that waited QueueTimeout
	// for a free instance of its module and got none (KindBusy), and of
	// one that found none and no room in the host's memory budget for
	// another (then it matches ErrCapacity too).
	ErrBusy = newSentinel(CodeResourceExhausted, ReasonBusy, "busy: no free instance", KindBusy)

	// ErrClosed is returned by every method of a closed host, and matched
	// by the calls it cut off while closing.
	ErrClosed = newSentinel(CodeUnavailable, ReasonClosed, "host: closed", 0)

	// ErrCapacity is matched by the error of a load that would take the
	// host past its capacity.
	ErrCapacity = newSentinel(CodeResourceExhausted, ReasonCapacity, "no capacity", 0)

	// ErrSystemPort is matched by the error (a *CallError of KindDenied)
	// of a message to a system port, abi.PortSettings, abi.PortTick or any
	// port whose name starts with '_', from outside the host: a client, a
	// peer host, a wire, or a guest's send or call. Only the host delivers
	// to system ports.
	ErrSystemPort = newSentinel(CodePermissionDenied, "", "only the host delivers to system ports", KindDenied)

	// ErrStaleGeneration is matched by the error of setting routes or
	// wiring with a generation older than the current one, so that a late
	// push cannot undo a newer one.
	ErrStaleGeneration = newSentinel(CodeFailedPrecondition, ReasonStaleGeneration, "stale generation", 0)

	// ErrGenerationMoved is matched by the error of changing routes
	// (UpdateRoutes) over a base generation that is not the table's: the
	// changes were made for another table, and the sender sends it whole.
	ErrGenerationMoved = newSentinel(CodeFailedPrecondition, ReasonGenerationMoved, "the routes are not at the base generation", 0)
)

// CallError is the error of a failed call into a component port.
//
// errors.Is matches ErrNotFound for KindNotFound, ErrBusy for KindBusy,
// context.DeadlineExceeded for KindTimeout and context.Canceled for
// KindCanceled.
type CallError struct {
	Module, Component, Port string
	Kind                    Kind
	Err                     error
}

func (e *CallError) Error() string {
	return e.Module + "/" + e.Component + "/" + e.Port + ": " + e.Kind.String() + ": " + e.Err.Error()
}

func (e *CallError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) and friends work on a CallError.
func (e *CallError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Kind == KindNotFound
	case ErrBusy:
		return e.Kind == KindBusy
	case context.DeadlineExceeded:
		return e.Kind == KindTimeout
	case context.Canceled:
		return e.Kind == KindCanceled
	}
	return false
}

// LoadError is the error of a failed load. The previous version of the
// module, if any, keeps serving.
type LoadError struct {
	// Module is the module's name when it is known (from the load's options
	// or the descriptor).
	Module string
	// File is the file loaded, empty for bytes.
	File string
	// Kind classifies a failure of the guest: KindTrap (e.g. a panic in
	// _initialize), KindTimeout, KindMemory, or KindABIViolation (no
	// version export, missing exports, unknown imports, an unreadable or
	// invalid descriptor, a panic of the wasm runtime). It is zero for
	// bytes that are not wasm, for another ABI version (the error wraps a
	// *VersionError), for invalid options, and for a load that failed on
	// another host.
	Kind Kind
	Err  error
}

func (e *LoadError) Error() string {
	switch {
	case e.Module != "" && e.File != "":
		return fmt.Sprintf("load module %q from %s: %v", e.Module, e.File, e.Err)
	case e.File != "":
		return fmt.Sprintf("load %s: %v", e.File, e.Err)
	case e.Module != "":
		return fmt.Sprintf("load module %q: %v", e.Module, e.Err)
	}
	return "load: " + e.Err.Error()
}

func (e *LoadError) Unwrap() error { return e.Err }

// VersionError says that a module speaks an ABI version the host does not.
type VersionError struct {
	Got, Want int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("module speaks ABI v%d, this host speaks ABI v%d", e.Got, e.Want)
}
