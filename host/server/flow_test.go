package server_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
)

// TestFlowWindow: a message many times the fixed flow-control window
// still goes through, both ways, unary and on a stream, with the smallest
// window (what 1 byte is taken as), the default, and grpc-go's estimate;
// a window past what HTTP/2 can announce is refused.
func TestFlowWindow(t *testing.T) {
	for _, w := range []int{1, 0, -1} {
		t.Run(map[int]string{1: "smallest", 0: "default", -1: "estimated"}[w], func(t *testing.T) {
			e := newEnv(t, envOptions{server: server.Options{FlowWindow: w}})
			e.load(t, guest(t, "echo"), "", api.Limits{})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			payload := bytes.Repeat([]byte{'w'}, 3<<20)
			req := &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: payload}
			resp, err := e.client.Invoke(ctx, req)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(payload, resp.GetPayload()), "unary: the reply differs")

			stream, err := e.client.InvokeStream(ctx)
			require.NoError(t, err)
			for id := range uint64(3) {
				require.NoError(t, stream.Send(&hostv1.InvokeStreamRequest{Id: id, Request: req}))
			}
			for range 3 {
				r, err := stream.Recv()
				require.NoError(t, err)
				require.Nil(t, r.GetError())
				assert.True(t, bytes.Equal(payload, r.GetResponse().GetPayload()), "stream: the reply differs")
			}
			require.NoError(t, stream.CloseSend())
		})
	}
	t.Run("refused", func(t *testing.T) {
		h, err := host.New(t.Context(), host.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { h.Close(context.WithoutCancel(t.Context())) })
		for _, w := range []int{-2, 1 << 29} {
			_, err := server.New(h, server.Options{FlowWindow: w})
			assert.ErrorContains(t, err, "FlowWindow", "FlowWindow %d", w)
		}
	})
}
