package host

import (
	"errors"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
)

// ErrOverMaximum is matched by the error of a load whose limits ask for
// more than Options.Maxima allow; the error names the bound. The host's
// other errors and kinds are those of package host/api.
var ErrOverMaximum = errors.New("over the host's maximum")

// errNotModule is wrapped when a wasm file lacks the version export.
var errNotModule = errors.New("not a tinyhost module")

// kindError carries the kind of a load failure up to the LoadError.
type kindError struct {
	kind api.Kind
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

func withKind(kind api.Kind, err error) error {
	if err == nil || kind == 0 {
		return err
	}
	return &kindError{kind, err}
}

// kindOf returns the kind of a load failure.
func kindOf(err error) api.Kind {
	var ke *kindError
	var ce *api.CallError
	switch {
	case errors.As(err, &ke):
		return ke.kind
	case errors.As(err, &ce):
		return ce.Kind
	case errors.As(err, new(*guest.PanicError)):
		return api.KindABIViolation
	}
	return 0
}

// statusKind is the kind of a failure a guest reported with status s (the
// host's files that use wazero's api package call it by this name).
func statusKind(s abi.Status) api.Kind { return api.StatusKind(s) }
