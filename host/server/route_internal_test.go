package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
)

// TestFromStatus: what a peer's toStatus makes of a host error, FromStatus
// makes back into the same kind, so that a remote call fails as a local one.
func TestFromStatus(t *testing.T) {
	to := abi.Address{Module: "b", Component: "c", Port: "in"}
	for kind := range kindStatus {
		t.Run(kind.String(), func(t *testing.T) {
			err := toStatus(&host.CallError{Module: to.Module, Component: to.Component, Port: to.Port, Kind: kind, Err: errors.New("boom")})
			got := FromStatus(err, to, "10.0.0.2:50051")
			assert.Equal(t, kind, got.Kind)
			assert.True(t, strings.HasPrefix(got.Error(), "b/c/in: "+kind.String()+": host 10.0.0.2:50051: boom"), got.Error())
		})
	}
	t.Run("deadline", func(t *testing.T) {
		got := FromStatus(status.Error(codes.DeadlineExceeded, "context deadline exceeded"), to, "p")
		assert.Equal(t, host.KindTimeout, got.Kind)
		assert.ErrorIs(t, got, context.DeadlineExceeded)
	})
	t.Run("transport", func(t *testing.T) {
		got := FromStatus(status.Error(codes.Unavailable, "connection refused"), to, "p")
		assert.Equal(t, host.KindUnavailable, got.Kind)
	})
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{toStatus(host.ErrClosed), true},
		{toStatus(&host.CallError{Kind: host.KindBusy, Err: host.ErrBusy}), true},
		{toStatus(&host.CallError{Kind: host.KindUnavailable, Err: errors.New("guest said so")}), false},
		{toStatus(&host.CallError{Kind: host.KindTrap, Err: errors.New("trap")}), false},
		{status.Error(codes.Unavailable, "transport is closing"), false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, Retryable(tc.err), "%v", tc.err)
	}
}
