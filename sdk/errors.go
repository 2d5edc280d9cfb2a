package sdk

import (
	"errors"

	"github.com/tinyhost/tinyhost/abi"
)

// Error is an error with an ABI status: what Send, Call, Emit and the other
// host calls return when the host answers with a status other than ok, and
// what a handler returns (directly or wrapped) to choose the status of its
// reply.
type Error struct {
	Status  abi.Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Status.String()
	}
	return e.Message
}

// Is reports whether target is the sentinel of e's status, so that
// errors.Is(err, ErrNotFound) holds for every not-found error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

// Sentinels, one per status, for errors.Is and for wrapping with %w:
//
//	return nil, fmt.Errorf("%w: no user %q", sdk.ErrNotFound, id)
var (
	ErrNotFound    = &Error{Status: abi.StatusNotFound}
	ErrDenied      = &Error{Status: abi.StatusDenied}
	ErrTooLarge    = &Error{Status: abi.StatusTooLarge}
	ErrTimeout     = &Error{Status: abi.StatusTimeout}
	ErrHopLimit    = &Error{Status: abi.StatusHopLimit}
	ErrUnavailable = &Error{Status: abi.StatusUnavailable}
	ErrBadRequest  = &Error{Status: abi.StatusBadRequest}
	ErrConflict    = &Error{Status: abi.StatusConflict}
	ErrQuota       = &Error{Status: abi.StatusQuota}
)

// statusOf returns the status a handler error maps to.
func statusOf(err error) abi.Status {
	var e *Error
	if errors.As(err, &e) && e.Status != abi.StatusOK {
		return e.Status
	}
	return abi.StatusError
}
