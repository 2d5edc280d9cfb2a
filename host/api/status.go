package api

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/abi"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail that every
// status made from a host error carries.
const ErrorDomain = "tinyhost.host.v1"

// Reasons of the ErrorInfo detail: they tell apart failures that share a
// gRPC code (a saturated pool from an oversized payload, a trap from a
// memory limit).
const (
	ReasonTrap            = "TRAP"
	ReasonTimeout         = "TIMEOUT"
	ReasonMemory          = "MEMORY_LIMIT"
	ReasonABIViolation    = "ABI_VIOLATION"
	ReasonHandler         = "HANDLER_ERROR"
	ReasonTooLarge        = "TOO_LARGE"
	ReasonDenied          = "DENIED"
	ReasonHopLimit        = "HOP_LIMIT"
	ReasonBusy            = "BUSY"
	ReasonNotFound        = "NOT_FOUND"
	ReasonUnavailable     = "UNAVAILABLE"
	ReasonCanceled        = "CANCELED"
	ReasonBadModule       = "BAD_MODULE"
	ReasonABIVersion      = "ABI_VERSION"
	ReasonClosed          = "CLOSED"
	ReasonCapacity        = "CAPACITY"
	ReasonStaleGeneration = "STALE_GENERATION"
	ReasonGenerationMoved = "GENERATION_MOVED"

	// Reasons of a module fetched from a source (LoadHeader.source).
	ReasonBadSource      = "BAD_SOURCE"
	ReasonNotWasm        = "NOT_WASM"
	ReasonDigestMismatch = "DIGEST_MISMATCH"
	ReasonUnreachable    = "UNREACHABLE"
	ReasonUnauthorized   = "UNAUTHORIZED"
	ReasonPlainHTTP      = "PLAIN_HTTP"
	ReasonNoFetcher      = "NO_FETCHER"
)

// Keys of the ErrorInfo metadata. MetaCause is the message of the error a
// *CallError or *LoadError wraps and MetaKind a CallError's kind (as its
// reason: the status's own reason is a wrapped sentinel's when there is
// one), so that the other side rebuilds it without taking the status
// message apart.
const (
	MetaModule    = "module"
	MetaComponent = "component"
	MetaPort      = "port"
	MetaCause     = "cause"
	MetaKind      = "kind"
	metaGot       = "abi_got"
	metaWant      = "abi_want"
)

// WindowHeader is the response header of DeliverStream that tells the
// client how many of its requests the host runs at once.
const WindowHeader = "tinyhost-window"

// ToStatus is the status of an error of the host: the one place where its
// errors become gRPC codes. A status error is kept as it is; a *CallError
// has the code and reason of its Kind, a Sentinel its own (a CallError
// that wraps one of another kind, e.g. ErrClosed, has the sentinel's), a
// *VersionError ABI_VERSION, any other *LoadError BAD_MODULE; a context's
// error is CANCELED or DEADLINE_EXCEEDED; anything else INTERNAL. The
// ErrorInfo metadata names the module, component and port when known. It
// returns nil for nil.
func ToStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	var (
		ce *CallError
		le *LoadError
		ve *VersionError
	)
	s := sentinelOf(err)
	isCall := errors.As(err, &ce)
	isLoad := errors.As(err, &le)
	meta := map[string]string{}
	switch {
	case isCall:
		meta[MetaModule], meta[MetaComponent], meta[MetaPort] = ce.Module, ce.Component, ce.Port
		meta[MetaCause], meta[MetaKind] = ce.Err.Error(), ce.Kind.Reason()
	case isLoad:
		meta[MetaModule] = le.Module
		meta[MetaCause] = le.Err.Error()
	}
	switch {
	case s != nil && s.reason != "" && !(isCall && s.kind != 0):
		return NewStatus(s.code, s.reason, meta, err.Error())
	case isCall:
		return NewStatus(ce.Kind.Code(), ce.Kind.Reason(), meta, err.Error())
	case errors.As(err, &ve):
		meta[metaGot], meta[metaWant] = strconv.Itoa(ve.Got), strconv.Itoa(ve.Want)
		return NewStatus(codes.InvalidArgument, ReasonABIVersion, meta, err.Error())
	case errors.Is(err, context.Canceled):
		// A load cut short by its caller is not a bad module.
		return status.New(codes.Canceled, WireText(err.Error()))
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, WireText(err.Error()))
	case isLoad:
		return NewStatus(codes.InvalidArgument, ReasonBadModule, meta, err.Error())
	}
	return status.New(codes.Internal, WireText(err.Error()))
}

// WireText is s made valid UTF-8, as a protobuf string must be: a guest's
// reason is any bytes, and one that is not UTF-8 would make the status,
// its details or the stream message that carries it fail to encode.
func WireText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// NewStatus is a status with an ErrorInfo detail of reason and metadata;
// empty metadata values are left out, and every text is made valid UTF-8
// (WireText).
func NewStatus(code codes.Code, reason string, meta map[string]string, msg string) *status.Status {
	st := status.New(code, WireText(msg))
	meta = maps.Clone(meta)
	maps.DeleteFunc(meta, func(_, v string) bool { return v == "" })
	for k, v := range meta {
		meta[k] = WireText(v)
	}
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}); err == nil {
		st = d
	}
	return st
}

// ErrorInfo returns the ErrorInfo detail of a status, or nil.
func ErrorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// StatusError is an error a host answered with, as a client sees it: its
// status (GRPCStatus, so that status.Code works on it and on what wraps
// it), and errors.Is matches every Sentinel of its reason (ErrClosed for
// CLOSED, api.ErrNotWasm for NOT_WASM, ...).
type StatusError struct {
	st     *status.Status
	reason string
	msg    string
	cause  error
}

func (e *StatusError) Error() string { return e.msg }

// GRPCStatus is the status the host answered with.
func (e *StatusError) GRPCStatus() *status.Status { return e.st }

// Reason is the ErrorInfo reason of the status, "" when it has none.
func (e *StatusError) Reason() string { return e.reason }

// Is matches the sentinels of e's reason.
func (e *StatusError) Is(target error) bool {
	s, ok := target.(*Sentinel)
	return ok && s.reason != "" && s.reason == e.reason
}

// Unwrap returns the *VersionError of an ABI_VERSION status, else nil.
func (e *StatusError) Unwrap() error { return e.cause }

// FromStatus is the error a status stands for, the inverse of ToStatus: a
// *CallError for a failed call (the kind from its reason, the target from
// its metadata), a *LoadError for a failed load, else a *StatusError. Each
// wraps a *StatusError, so that the status stays reachable. It returns nil
// for OK and for nil.
func FromStatus(st *status.Status) error {
	if st.Code() == codes.OK {
		return nil
	}
	info := ErrorInfo(st)
	meta := info.GetMetadata()
	e := &StatusError{st: st, reason: info.GetReason(), msg: st.Message()}
	cause, wrapped := meta[MetaCause]
	if wrapped {
		e.msg = cause
	}
	if e.reason == ReasonABIVersion {
		got, _ := strconv.Atoi(meta[metaGot])
		want, _ := strconv.Atoi(meta[metaWant])
		e.cause = &VersionError{Got: got, Want: want}
	}
	switch {
	case !wrapped:
		return e
	case meta[MetaPort] != "":
		kind := reasonKind(meta[MetaKind])
		if kind == 0 {
			kind = codeKind(st.Code())
		}
		return &CallError{Module: meta[MetaModule], Component: meta[MetaComponent], Port: meta[MetaPort], Kind: kind, Err: e}
	}
	return &LoadError{Module: meta[MetaModule], Err: e}
}

// Error is FromStatus of the status of err: a gRPC status error made
// typed. An error that is not a status error is returned as it is.
func Error(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return FromStatus(st)
}

// CallErrorOf is err, an error of a call to target on another host, as a
// *CallError: the peer's own when it sent one, else one whose kind follows
// from the status code (a failure of the transport or of the peer's
// checks; a code no kind has is KindUnavailable).
func CallErrorOf(err error, to abi.Address) *CallError {
	var ce *CallError
	if errors.As(Error(err), &ce) {
		return ce
	}
	st := status.Convert(err)
	e := &StatusError{st: st, msg: st.Message()}
	if info := ErrorInfo(st); info != nil {
		e.reason = info.GetReason()
	}
	kind := reasonKind(e.reason)
	if kind == 0 {
		kind = codeKind(st.Code())
	}
	return &CallError{Module: to.Module, Component: to.Component, Port: to.Port, Kind: kind, Err: e}
}

// Retryable reports whether a failed delivery certainly did not run, so
// that it may go to another replica: the host refused it before running it
// (CLOSED: it is shutting down; BUSY: no instance came free). Reason
// UNAVAILABLE is not enough: a guest may answer it after doing work.
func Retryable(err error) bool {
	info := ErrorInfo(status.Convert(err))
	switch info.GetReason() {
	case ReasonClosed, ReasonBusy:
		return true
	}
	return false
}

// TraceID returns the trace id of a W3C traceparent
// ("00-<trace id>-<parent id>-<flags>"), or "" when it is malformed: the
// trace id must be 32 lower-case hex digits, not all zero. A guest sets
// the traceparent of the messages it sends, and the id lands in host log
// lines, so anything else is not taken.
func TraceID(traceparent string) string {
	if len(traceparent) < 55 || traceparent[2] != '-' || traceparent[35] != '-' {
		return ""
	}
	id := traceparent[3:35]
	zero := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
		zero = zero && c == '0'
	}
	if zero {
		return ""
	}
	return id
}
