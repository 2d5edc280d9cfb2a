package cluster_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/cluster"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestReplySizes: an SDK component (relay) calls an SDK echo in the same
// host and on another, with replies from a few bytes to past the SDK's
// first result buffer and the host's request buffer: each arrives whole,
// from the guest's result buffer (abi.ExportResultBuffer) when it is
// longer than the buffer the call offered, and the next, smaller, reply
// after a large one is not polluted by it.
func TestReplySizes(t *testing.T) {
	ctx := t.Context()
	relay, echo := e2e.WasmBytes(t, e2e.Relay), e2e.WasmBytes(t, "internal/e2e/testdata/sdkecho")
	remote := newHost(t, nil, api.Limits{}, echo)
	_, addr := serveHost(t, remote, server.Options{})

	local := newHost(t, cluster.New(cluster.Options{}), api.Limits{}, relay)
	require.NoError(t, local.SetRoutes(1, map[string][]string{"sdkecho": {addr}}))
	both := newHost(t, nil, api.Limits{}, relay, echo)

	for _, where := range []struct {
		name   string
		invoke func(api.Request) (api.Response, error)
	}{
		{"in-process", func(r api.Request) (api.Response, error) { return both.Invoke(ctx, r) }},
		{"remote", func(r api.Request) (api.Response, error) { return local.Invoke(ctx, r) }},
	} {
		for _, n := range []int{10, 600, 100 << 10, 40, 1 << 20, 3} {
			t.Run(fmt.Sprintf("%s/%d", where.name, n), func(t *testing.T) {
				// A JSON string of n bytes, the payload sdkecho echoes.
				payload := append(append([]byte{'"'}, bytes.Repeat([]byte{'y'}, n-2)...), '"')
				req := api.Request{Module: "relay", Component: "relay", Port: "call",
					Payload: fmt.Appendf(nil, `{"to":"sdkecho/echo/in","payload":%s}`, payload)}
				resp, err := where.invoke(req)
				require.NoError(t, err)
				assert.Equal(t, len(payload), len(resp.Payload))
				assert.True(t, bytes.Equal(payload, resp.Payload), "the reply differs from the payload")
			})
		}
	}
}
