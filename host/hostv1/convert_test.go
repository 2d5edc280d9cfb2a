package hostv1_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

var to = abi.Address{Module: "b", Component: "c", Port: "in"}

// TestCallErrorRoundTrip: what ToStatus makes of a failed call, FromStatus
// makes back into the same error, so that a call fails the same way on
// another host as on this one.
func TestCallErrorRoundTrip(t *testing.T) {
	for kind := api.KindTrap; kind <= api.KindCanceled; kind++ {
		t.Run(kind.String(), func(t *testing.T) {
			sent := &api.CallError{Module: to.Module, Component: to.Component, Port: to.Port, Kind: kind, Err: errors.New("boom")}
			st := hostv1.ToStatus(fmt.Errorf("wrapped: %w", sent))
			assert.Equal(t, codes.Code(kind.Code()), st.Code())
			assert.Equal(t, kind.Reason(), hostv1.ErrorInfo(st).GetReason())
			assert.Equal(t, "wrapped: "+sent.Error(), st.Message())

			var got *api.CallError
			require.ErrorAs(t, hostv1.FromStatus(st), &got)
			assert.Equal(t, sent.Error(), got.Error())
			assert.Equal(t, kind, got.Kind)
			assert.Equal(t, codes.Code(kind.Code()), status.Code(got), "the status stays reachable")
			assert.Equal(t, kind == api.KindTimeout, errors.Is(got, context.DeadlineExceeded))
			assert.Equal(t, kind == api.KindCanceled, errors.Is(got, context.Canceled))
			assert.Equal(t, kind == api.KindNotFound, errors.Is(got, api.ErrNotFound))
			assert.Equal(t, kind == api.KindBusy, errors.Is(got, api.ErrBusy))
		})
	}
}

func TestKindTable(t *testing.T) {
	seen := map[string]api.Kind{}
	for kind := api.KindTrap; kind <= api.KindCanceled; kind++ {
		require.NotContains(t, seen, kind.Reason(), "%v and %v share a reason", kind, seen[kind.Reason()])
		seen[kind.Reason()] = kind
		assert.NotEqual(t, "other", kind.Label())
	}
	assert.Equal(t, "other", api.Kind(0).Label())
	assert.Equal(t, "kind(200)", api.Kind(200).String())
	for s, want := range map[abi.Status]api.Kind{
		abi.StatusError: api.KindHandler, abi.StatusNotFound: api.KindNotFound, abi.StatusDenied: api.KindDenied,
		abi.StatusTooLarge: api.KindTooLarge, abi.StatusTimeout: api.KindTimeout, abi.StatusHopLimit: api.KindHopLimit,
		abi.StatusUnavailable: api.KindUnavailable, abi.StatusBadRequest: api.KindHandler,
	} {
		assert.Equal(t, want, api.StatusKind(s), "%v", s)
	}
}

// TestSentinels: a sentinel keeps its code and reason across the wire, and
// a CallError keeps its target when it wraps one.
func TestSentinels(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		sentinel error
		code     codes.Code
		reason   string
	}{
		{"closed", fmt.Errorf("invoke: %w", api.ErrClosed), api.ErrClosed, codes.Unavailable, api.ReasonClosed},
		{"closed call", &api.CallError{Module: "b", Component: "c", Port: "in", Kind: api.KindNotFound, Err: api.ErrClosed}, api.ErrClosed, codes.Unavailable, api.ReasonClosed},
		{"not found", fmt.Errorf("unload %q: %w", "x", api.ErrNotFound), api.ErrNotFound, codes.NotFound, api.ReasonNotFound},
		{"stale", fmt.Errorf("routes generation 1 is older than 2: %w", api.ErrStaleGeneration), api.ErrStaleGeneration, codes.FailedPrecondition, api.ReasonStaleGeneration},
		{"moved", fmt.Errorf("routes generation is 3, not the base 2: %w", api.ErrGenerationMoved), api.ErrGenerationMoved, codes.FailedPrecondition, api.ReasonGenerationMoved},
		{"capacity", &api.LoadError{Module: "m", Err: api.ErrCapacity}, api.ErrCapacity, codes.ResourceExhausted, api.ReasonCapacity},
		{"artifact", &api.LoadError{Module: "m", Err: fmt.Errorf("fetch: %w", api.ErrUnauthorized)}, api.ErrUnauthorized, codes.PermissionDenied, api.ReasonUnauthorized},
		{"outermost", &artifact.UnreachableError{Op: "resolve r/a:1", Host: "r", Attempts: 2, Err: fmt.Errorf("get: %w", api.ErrPlainHTTP)}, api.ErrUnreachable, codes.Unavailable, api.ReasonUnreachable},
		{"matched by Is", fmt.Errorf("fetch: %w", &artifact.DigestMismatchError{What: "x", Want: "a", Got: "b"}), api.ErrDigestMismatch, codes.DataLoss, api.ReasonDigestMismatch},
		{"a kind's sentinel matched by Is", fmt.Errorf("unload: %w", notLoaded("x")), api.ErrNotFound, codes.NotFound, api.ReasonNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := hostv1.ToStatus(tt.err)
			assert.Equal(t, tt.code, st.Code())
			assert.Equal(t, tt.reason, hostv1.ErrorInfo(st).GetReason())
			got := hostv1.FromStatus(st)
			assert.ErrorIs(t, got, tt.sentinel)
			assert.Equal(t, tt.err.Error(), got.Error())
		})
	}
	t.Run("system port", func(t *testing.T) {
		err := &api.CallError{Module: "b", Component: "c", Port: "_tick", Kind: api.KindDenied, Err: fmt.Errorf("port %q: %w", "_tick", api.ErrSystemPort)}
		st := hostv1.ToStatus(err)
		assert.Equal(t, codes.PermissionDenied, st.Code())
		assert.Equal(t, api.ReasonDenied, hostv1.ErrorInfo(st).GetReason())
		assert.Equal(t, "_tick", hostv1.ErrorInfo(st).GetMetadata()[hostv1.MetaPort])
	})
}

func TestLoadErrors(t *testing.T) {
	version := &api.LoadError{Module: "m", Err: &api.VersionError{Got: 2, Want: 1}}
	st := hostv1.ToStatus(version)
	assert.Equal(t, codes.InvalidArgument, st.Code())
	assert.Equal(t, api.ReasonABIVersion, hostv1.ErrorInfo(st).GetReason())
	var ve *api.VersionError
	require.ErrorAs(t, hostv1.FromStatus(st), &ve)
	assert.Equal(t, api.VersionError{Got: 2, Want: 1}, *ve)
	var le *api.LoadError
	require.ErrorAs(t, hostv1.FromStatus(st), &le)
	assert.Equal(t, "m", le.Module)
	assert.Equal(t, version.Error(), le.Error())

	bad := &api.LoadError{Module: "m", Err: errors.New("no version export")}
	assert.Equal(t, api.ReasonBadModule, hostv1.ErrorInfo(hostv1.ToStatus(bad)).GetReason())
	canceled := &api.LoadError{Module: "m", Err: fmt.Errorf("compile: %w", context.Canceled)}
	assert.Equal(t, codes.Canceled, hostv1.ToStatus(canceled).Code(), "a load cut short is not a bad module")
	assert.Equal(t, codes.Internal, hostv1.ToStatus(errors.New("what")).Code())
	assert.Nil(t, hostv1.ToStatus(nil))
	assert.NoError(t, hostv1.FromStatus(nil))
}

func TestCallErrorOf(t *testing.T) {
	tests := []struct {
		err  error
		want api.Kind
	}{
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), api.KindTimeout},
		{status.Error(codes.Canceled, "context canceled"), api.KindCanceled},
		{status.Error(codes.Unavailable, "connection refused"), api.KindUnavailable},
		{status.Error(codes.Unauthenticated, "no token"), api.KindDenied},
		{status.Error(codes.InvalidArgument, "module is empty"), api.KindUnavailable},
		{hostv1.ToStatus(&api.CallError{Module: "b", Component: "c", Port: "in", Kind: api.KindTrap, Err: errors.New("boom")}).Err(), api.KindTrap},
	}
	for _, tt := range tests {
		got := hostv1.CallErrorOf(tt.err, to)
		assert.Equal(t, tt.want, got.Kind, "%v", tt.err)
		assert.Equal(t, to.Module+"/"+to.Component+"/"+to.Port, got.Module+"/"+got.Component+"/"+got.Port)
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{hostv1.ToStatus(api.ErrClosed).Err(), true},
		{hostv1.ToStatus(&api.CallError{Kind: api.KindBusy, Err: api.ErrBusy}).Err(), true},
		{hostv1.ToStatus(&api.CallError{Kind: api.KindUnavailable, Err: errors.New("guest said so")}).Err(), false},
		{hostv1.ToStatus(&api.CallError{Kind: api.KindTrap, Err: errors.New("trap")}).Err(), false},
		{status.Error(codes.Unavailable, "transport is closing"), false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, hostv1.Retryable(tc.err), "%v", tc.err)
	}
}

func TestTraceID(t *testing.T) {
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", api.TraceID("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	assert.Empty(t, api.TraceID("00-short"))
	for _, id := range []string{
		"4BF92F3577B34DA6A3CE929D0E0E4736",  // upper case
		"4bf92f3577b34da6a3ce929d0e0e473g",  // not hex
		"4bf92f3577b34da6\n[ERROR] forged!", // a log line
		"00000000000000000000000000000000",  // invalid per W3C
	} {
		assert.Empty(t, api.TraceID("00-"+id+"-00f067aa0ba902b7-01"), id)
	}
}

// notLoaded is an error that matches api.ErrNotFound with an Is method, as
// the host's own are.
type notLoaded string

func (e notLoaded) Error() string        { return "module " + string(e) + " is not loaded" }
func (e notLoaded) Is(target error) bool { return target == api.ErrNotFound }
