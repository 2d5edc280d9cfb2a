package api

import (
	"strconv"

	"github.com/tinyhost/tinyhost/abi"
)

// Kind classifies a failed call.
type Kind uint8

const (
	// KindTrap: the guest trapped or exited (e.g. a Go panic that was not
	// recovered). The instance was discarded.
	KindTrap Kind = iota + 1
	// KindTimeout: the call outran its deadline (CallTimeout or the
	// context's). The instance was discarded.
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
	// KindDenied: the module lacks a capability, or the message is for a
	// system port (ErrSystemPort).
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
	// KindCanceled: the caller cancelled the call (its context was
	// cancelled, not its deadline passed). A running instance was
	// discarded.
	KindCanceled
)

// kinds is everything a Kind stands for, on every side of the host: its
// name in messages, the ErrorInfo reason and gRPC code of its status, the
// ABI status a guest gets for it from a host call, and its label in
// metrics. It is the one table of kinds; each mapping below reads it.
var kinds = [...]kindRow{
	KindTrap:         {"trap", ReasonTrap, CodeAborted, abi.StatusError, "trap"},
	KindTimeout:      {"timeout", ReasonTimeout, CodeDeadlineExceeded, abi.StatusTimeout, "timeout"},
	KindMemory:       {"memory limit", ReasonMemory, CodeAborted, abi.StatusError, "memory_limit"},
	KindABIViolation: {"ABI violation", ReasonABIViolation, CodeAborted, abi.StatusError, "abi_violation"},
	KindHandler:      {"handler error", ReasonHandler, CodeUnknown, abi.StatusError, "handler_error"},
	KindTooLarge:     {"too large", ReasonTooLarge, CodeResourceExhausted, abi.StatusTooLarge, "too_large"},
	KindDenied:       {"denied", ReasonDenied, CodePermissionDenied, abi.StatusDenied, "denied"},
	KindHopLimit:     {"hop limit", ReasonHopLimit, CodeFailedPrecondition, abi.StatusHopLimit, "hop_limit"},
	KindBusy:         {"busy", ReasonBusy, CodeResourceExhausted, abi.StatusUnavailable, "busy"},
	KindNotFound:     {"not found", ReasonNotFound, CodeNotFound, abi.StatusNotFound, "not_found"},
	KindUnavailable:  {"unavailable", ReasonUnavailable, CodeUnavailable, abi.StatusUnavailable, "unavailable"},
	KindCanceled:     {"canceled", ReasonCanceled, CodeCanceled, abi.StatusTimeout, "canceled"},
}

type kindRow struct {
	name   string
	reason string
	code   Code
	status abi.Status
	label  string
}

// unknown is the row of a kind the table does not have.
var unknown = kindRow{code: CodeInternal, status: abi.StatusError, label: "other"}

func (k Kind) valid() bool { return k > 0 && int(k) < len(kinds) }

func (k Kind) row() *kindRow {
	if k.valid() {
		return &kinds[k]
	}
	return &unknown
}

func (k Kind) String() string {
	if k.valid() {
		return kinds[k].name
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Reason is the ErrorInfo reason of the status of a call that failed with
// k, "" for an unknown kind.
func (k Kind) Reason() string { return k.row().reason }

// Code is the gRPC code of the status of a call that failed with k,
// Internal for an unknown kind.
func (k Kind) Code() Code { return k.row().code }

// Status is the ABI status a guest's host call (send, call) gets when the
// message failed with k: StatusError for the kinds the ABI has no status
// for.
func (k Kind) Status() abi.Status { return k.row().status }

// Label is k's label in metrics ("trap", "memory_limit", ...), "other" for
// an unknown kind.
func (k Kind) Label() string { return k.row().label }

// StatusKind is the kind of a failure a guest reported with status s (a
// handler's response, or a host call's result): the kind of the same name
// (not found, denied, too large, timeout, hop limit, unavailable), else
// KindHandler.
func StatusKind(s abi.Status) Kind {
	for k := KindTrap; k.valid(); k++ {
		if kinds[k].status == s && kinds[k].name == s.String() {
			return k
		}
	}
	return KindHandler
}

// ReasonKind is the kind whose reason is reason, or 0.
func ReasonKind(reason string) Kind {
	for k := KindTrap; k.valid(); k++ {
		if kinds[k].reason == reason {
			return k
		}
	}
	return 0
}

// CodeKind is the kind of a status that carries no reason (a failure of the
// transport or of the server's checks): the first kind with its code;
// UNAUTHENTICATED is KindDenied and a code no kind has is KindUnavailable.
func CodeKind(c Code) Kind {
	if c == CodeUnauthenticated {
		return KindDenied
	}
	for k := KindTrap; k.valid(); k++ {
		if kinds[k].code == c {
			return k
		}
	}
	return KindUnavailable
}
