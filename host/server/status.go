package server

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/artifact"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail that every
// status error from a host error carries; its Reason is one of the Reason
// constants and its metadata names module, component and port when known.
const ErrorDomain = "tinyhost.host.v1"

// Reasons of the ErrorInfo detail: they tell apart failures that share a
// gRPC code (a saturated pool from an oversized payload, a trap from a
// memory limit).
const (
	ReasonTrap         = "TRAP"
	ReasonTimeout      = "TIMEOUT"
	ReasonMemory       = "MEMORY_LIMIT"
	ReasonABIViolation = "ABI_VIOLATION"
	ReasonHandler      = "HANDLER_ERROR"
	ReasonTooLarge     = "TOO_LARGE"
	ReasonDenied       = "DENIED"
	ReasonHopLimit     = "HOP_LIMIT"
	ReasonBusy         = "BUSY"
	ReasonNotFound     = "NOT_FOUND"
	ReasonUnavailable  = "UNAVAILABLE"
	ReasonBadModule    = "BAD_MODULE"
	ReasonABIVersion   = "ABI_VERSION"
	ReasonClosed       = "CLOSED"
	ReasonCapacity     = "CAPACITY"

	// Reasons of a module fetched from a source (LoadHeader.source).
	ReasonBadSource      = "BAD_SOURCE"
	ReasonNotWasm        = "NOT_WASM"
	ReasonDigestMismatch = "DIGEST_MISMATCH"
	ReasonUnreachable    = "UNREACHABLE"
	ReasonUnauthorized   = "UNAUTHORIZED"
	ReasonPlainHTTP      = "PLAIN_HTTP"
)

// artifactStatus maps the errors of fetching a module to codes and reasons,
// in the order they are checked.
var artifactStatus = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{artifact.ErrInvalidSource, codes.InvalidArgument, ReasonBadSource},
	{artifact.ErrNotWasm, codes.InvalidArgument, ReasonNotWasm},
	{artifact.ErrDigestMismatch, codes.DataLoss, ReasonDigestMismatch},
	{artifact.ErrTooLarge, codes.ResourceExhausted, ReasonTooLarge},
	{artifact.ErrUnreachable, codes.Unavailable, ReasonUnreachable},
	{artifact.ErrUnauthorized, codes.PermissionDenied, ReasonUnauthorized},
	{artifact.ErrNotFound, codes.NotFound, ReasonNotFound},
	{artifact.ErrPlainHTTP, codes.FailedPrecondition, ReasonPlainHTTP},
}

// kindStatus maps a failed call's kind to its code and reason. See the
// package documentation for why each code.
var kindStatus = map[host.Kind]struct {
	code   codes.Code
	reason string
}{
	host.KindTrap:         {codes.Aborted, ReasonTrap},
	host.KindMemory:       {codes.Aborted, ReasonMemory},
	host.KindABIViolation: {codes.Aborted, ReasonABIViolation},
	host.KindTimeout:      {codes.DeadlineExceeded, ReasonTimeout},
	host.KindHandler:      {codes.Unknown, ReasonHandler},
	host.KindTooLarge:     {codes.ResourceExhausted, ReasonTooLarge},
	host.KindBusy:         {codes.ResourceExhausted, ReasonBusy},
	host.KindDenied:       {codes.PermissionDenied, ReasonDenied},
	host.KindHopLimit:     {codes.FailedPrecondition, ReasonHopLimit},
	host.KindNotFound:     {codes.NotFound, ReasonNotFound},
	host.KindUnavailable:  {codes.Unavailable, ReasonUnavailable},
}

// toStatus turns an error of the host library into a status error. It is
// the one place where host errors become gRPC codes.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var (
		code   = codes.Internal
		reason string
		meta   map[string]string
	)
	var callErr *host.CallError
	var loadErr *host.LoadError
	var versionErr *host.VersionError
	if code, reason, ok := artifactCode(err); ok {
		if errors.As(err, &loadErr) && loadErr.Module != "" {
			meta = map[string]string{"module": loadErr.Module}
		}
		return withReason(code, reason, meta, err.Error())
	}
	switch {
	case errors.Is(err, host.ErrClosed):
		code, reason = codes.Unavailable, ReasonClosed
	case errors.Is(err, host.ErrCapacity):
		code, reason = codes.ResourceExhausted, ReasonCapacity
		if errors.As(err, &loadErr) && loadErr.Module != "" {
			meta = map[string]string{"module": loadErr.Module}
		}
	case errors.As(err, &callErr):
		ks, ok := kindStatus[callErr.Kind]
		if ok {
			code, reason = ks.code, ks.reason
		}
		meta = map[string]string{"module": callErr.Module, "component": callErr.Component, "port": callErr.Port}
		if callErr.Kind == host.KindTimeout && errors.Is(callErr.Err, context.Canceled) {
			code = codes.Canceled
		}
	case errors.As(err, &versionErr):
		code, reason = codes.InvalidArgument, ReasonABIVersion
		if errors.As(err, &loadErr) && loadErr.Module != "" {
			meta = map[string]string{"module": loadErr.Module}
		}
	case errors.As(err, &loadErr):
		code, reason = codes.InvalidArgument, ReasonBadModule
		if loadErr.Module != "" {
			meta = map[string]string{"module": loadErr.Module}
		}
		// A load cut short by its caller is not a bad module.
		if errors.Is(err, context.Canceled) {
			code, reason = codes.Canceled, ""
		} else if errors.Is(err, context.DeadlineExceeded) {
			code, reason = codes.DeadlineExceeded, ""
		}
	case errors.Is(err, host.ErrNotFound):
		code, reason = codes.NotFound, ReasonNotFound
	case errors.Is(err, host.ErrBusy):
		code, reason = codes.ResourceExhausted, ReasonBusy
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	if reason == "" {
		return status.Error(code, err.Error())
	}
	return withReason(code, reason, meta, err.Error())
}

// artifactCode is the code and reason of an error of fetching a module.
func artifactCode(err error) (codes.Code, string, bool) {
	for _, a := range artifactStatus {
		if errors.Is(err, a.err) {
			return a.code, a.reason, true
		}
	}
	return 0, "", false
}

// withReason is a status error with an ErrorInfo detail; empty metadata
// values are left out.
func withReason(code codes.Code, reason string, meta map[string]string, msg string) error {
	st := status.New(code, msg)
	for k, v := range meta {
		if v == "" {
			delete(meta, k)
		}
	}
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}); derr == nil {
		st = d
	}
	return st.Err()
}

// reasonOf returns the ErrorInfo reason of a status, or "".
func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
