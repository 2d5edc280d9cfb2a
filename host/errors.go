package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrNotFound is matched (errors.Is) by every error about a module,
	// component or port that does not exist. The error's message names
	// what is missing.
	ErrNotFound = errors.New("not found")

	// ErrBusy is matched by the error of a call that waited QueueTimeout
	// for a free instance of its module and got none.
	ErrBusy = errors.New("busy: no free instance")

	// ErrClosed is returned by every method of a closed Host.
	ErrClosed = errors.New("host: closed")

	// ErrCapacity is matched by the error of a load that would take the
	// host past Options.Capacity.
	ErrCapacity = errors.New("no capacity")

	// ErrSystemPort is matched by the error (a *CallError of KindDenied)
	// of a message to a system port, abi.PortSettings, abi.PortTick or any
	// port whose name starts with '_', from outside the host: a client, a
	// peer host, a wire, or a guest's send or call. Only the host delivers
	// to system ports.
	ErrSystemPort = errors.New("only the host delivers to system ports")
)

// Kind classifies a failed call.
type Kind uint8

const (
	// KindTrap: the guest trapped or exited (e.g. a Go panic that was not
	// recovered). The instance was discarded.
	KindTrap Kind = iota + 1
	// KindTimeout: the call outran its deadline (CallTimeout or the
	// context's) or its context was cancelled. The instance was discarded.
	KindTimeout
	// KindMemory: the guest needed more memory than its MemoryPages limit.
	// The instance was discarded.
	KindMemory
	// KindABIViolation: the guest broke ABI v1 (a pointer outside its
	// memory, a malformed response), or made the wasm runtime panic. The
	// instance was discarded.
	KindABIViolation
	// KindHandler: the guest's handler returned an error (abi.StatusError).
	KindHandler
	// KindTooLarge: a request, response or message exceeded
	// MaxMessageSize.
	KindTooLarge
	// KindDenied: the module lacks a capability.
	KindDenied
	// KindHopLimit: the message was forwarded more than HopLimit times.
	KindHopLimit
	// KindBusy: no instance became free within QueueTimeout.
	KindBusy
	// KindNotFound: no such module, component or port.
	KindNotFound
	// KindUnavailable: the target cannot take the message now (e.g. it is
	// being unloaded, or too many sends are in flight).
	KindUnavailable
)

var kindNames = [...]string{
	KindTrap:         "trap",
	KindTimeout:      "timeout",
	KindMemory:       "memory limit",
	KindABIViolation: "ABI violation",
	KindHandler:      "handler error",
	KindTooLarge:     "too large",
	KindDenied:       "denied",
	KindHopLimit:     "hop limit",
	KindBusy:         "busy",
	KindNotFound:     "not found",
	KindUnavailable:  "unavailable",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// CallError is the error of a failed call into a component port.
//
// errors.Is matches ErrNotFound for KindNotFound, ErrBusy for KindBusy and
// context.DeadlineExceeded for KindTimeout (unless the context was
// cancelled, which matches context.Canceled through Err).
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
		return e.Kind == KindTimeout && !errors.Is(e.Err, context.Canceled)
	}
	return false
}

// LoadError is the error of a failed Load, LoadFile or module-directory
// load. The previous version of the module, if any, keeps serving.
type LoadError struct {
	// Module is the module's name when it is known (from LoadOptions or
	// the descriptor).
	Module string
	// File is the file loaded, empty for bytes.
	File string
	// Kind classifies a failure of the guest: KindTrap (e.g. a panic in
	// _initialize), KindTimeout, KindMemory, or KindABIViolation (no
	// version export, missing exports, unknown imports, an unreadable or
	// invalid descriptor, a panic of the wasm runtime). It is zero for bytes that are not wasm, for
	// another ABI version (the error wraps a *VersionError) and for invalid
	// options.
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

// VersionError says that a module speaks an ABI version this host does not.
type VersionError struct {
	Got, Want int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("module speaks ABI v%d, this host speaks ABI v%d", e.Got, e.Want)
}

// errNotModule is wrapped when a wasm file lacks the version export.
var errNotModule = errors.New("not a tinyhost module")

// kindError carries the kind of a load failure up to the LoadError.
type kindError struct {
	kind Kind
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

func withKind(kind Kind, err error) error {
	if err == nil || kind == 0 {
		return err
	}
	return &kindError{kind, err}
}

// kindOf returns the kind of a load failure.
func kindOf(err error) Kind {
	var ke *kindError
	var ce *CallError
	switch {
	case errors.As(err, &ke):
		return ke.kind
	case errors.As(err, &ce):
		return ce.Kind
	case errors.As(err, new(*panicError)):
		return KindABIViolation
	}
	return 0
}
