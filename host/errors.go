package host

import (
	"errors"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
)

// The errors and kinds of the host are those of the contract package
// (host/api), which clients and peers share without the runtime; they are
// declared here too so that an embedder needs only this package.
var (
	// ErrNotFound is matched (errors.Is) by every error about a module,
	// component or port that does not exist. The error's message names
	// what is missing.
	ErrNotFound = api.ErrNotFound
	// ErrBusy is matched by the error of a call that waited QueueTimeout
	// for a free instance of its module and got none.
	ErrBusy = api.ErrBusy
	// ErrClosed is returned by every method of a closed Host.
	ErrClosed = api.ErrClosed
	// ErrCapacity is matched by the error of a load that would take the
	// host past Options.Capacity.
	ErrCapacity = api.ErrCapacity
	// ErrSystemPort is matched by the error (a *CallError of KindDenied)
	// of a message to a system port from outside the host.
	ErrSystemPort = api.ErrSystemPort
)

type (
	// Kind classifies a failed call: see api.Kind.
	Kind = api.Kind
	// CallError is the error of a failed call into a component port: see
	// api.CallError.
	CallError = api.CallError
	// LoadError is the error of a failed Load, LoadFile or module-directory
	// load: see api.LoadError.
	LoadError = api.LoadError
	// VersionError says that a module speaks an ABI version this host does
	// not.
	VersionError = api.VersionError
)

// The kinds of a failed call; see api.Kind for each.
const (
	KindTrap         = api.KindTrap
	KindTimeout      = api.KindTimeout
	KindMemory       = api.KindMemory
	KindABIViolation = api.KindABIViolation
	KindHandler      = api.KindHandler
	KindTooLarge     = api.KindTooLarge
	KindDenied       = api.KindDenied
	KindHopLimit     = api.KindHopLimit
	KindBusy         = api.KindBusy
	KindNotFound     = api.KindNotFound
	KindUnavailable  = api.KindUnavailable
	KindCanceled     = api.KindCanceled
)

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

// statusKind is the kind of a failure a guest reported with status s (the
// host's files that use wazero's api package call it by this name).
func statusKind(s abi.Status) Kind { return api.StatusKind(s) }
