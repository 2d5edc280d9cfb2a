package host_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestInvokeAppend: the reply is appended to the caller's buffer, which a
// caller reuses call after call without an allocation for the reply; what
// the buffer held before stays; a failed call and a system port leave the
// buffer alone.
func TestInvokeAppend(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})
	ctx := ctxT(t, 30*time.Second)
	req := api.Request{Module: "echo", Component: "echo", Port: "in", Payload: bytes.Repeat([]byte{'x'}, 1000)}

	t.Run("appended", func(t *testing.T) {
		resp, err := h.InvokeAppend(ctx, []byte("head:"), req)
		require.NoError(t, err)
		assert.Equal(t, "head:"+string(req.Payload), string(resp.Payload))
	})
	t.Run("reused", func(t *testing.T) {
		buf := make([]byte, 0, 4096)
		for i := range 3 {
			req.Payload = bytes.Repeat([]byte{'a' + byte(i)}, 100*(i+1))
			resp, err := h.InvokeAppend(ctx, buf[:0], req)
			require.NoError(t, err)
			assert.Equal(t, string(req.Payload), string(resp.Payload))
			assert.Same(t, &buf[:1][0], &resp.Payload[0], "the reply is in the caller's buffer")
		}
		req.Payload = bytes.Repeat([]byte{'y'}, 1024)
		allocs := testing.AllocsPerRun(100, func() {
			resp, err := h.InvokeAppend(ctx, buf[:0], req)
			if err != nil || len(resp.Payload) != len(req.Payload) {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "allocations per call with a reused buffer")
	})
	t.Run("larger than the buffer", func(t *testing.T) {
		req.Payload = bytes.Repeat([]byte{'z'}, 5000)
		buf := make([]byte, 0, 16)
		resp, err := h.InvokeAppend(ctx, buf, req)
		require.NoError(t, err)
		assert.Equal(t, string(req.Payload), string(resp.Payload))
	})
	t.Run("failed", func(t *testing.T) {
		buf := []byte("kept")
		resp, err := h.InvokeAppend(ctx, buf[:0], api.Request{Module: "echo", Component: "echo", Port: "fail"})
		assert.ErrorContains(t, err, "boom")
		assert.Nil(t, resp.Payload)
		assert.Equal(t, "kept", string(buf))
	})
	t.Run("system port", func(t *testing.T) {
		_, err := h.InvokeAppend(ctx, nil, api.Request{Module: "echo", Component: "echo", Port: abi.PortSettings})
		assert.ErrorIs(t, err, api.ErrSystemPort)
	})
}
