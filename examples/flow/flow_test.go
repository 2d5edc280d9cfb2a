// Package flow_test runs the flow example end to end: common/split on one
// host, its output port wired to tally/counter/in on another.
package flow_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// TestFlow starts two real hosts as the README does: host 2 runs tally
// (one instance, so that one total holds every item), host 1 runs common
// with a config file that routes tally to host 2 and wires
// common/split/out to tally/counter/in. Items split on host 1 are counted
// on host 2.
func TestFlow(t *testing.T) {
	h2 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{e2e.Wasm(t, e2e.Tally)}, Args: []string{"--max-instances", "1"}})
	cfg := e2e.ConfigFile(t, fmt.Sprintf(`routes:
  tally: [%q]
wiring:
  common/split/out: [tally/counter/in]
`, h2.Addr))
	h1 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{e2e.Wasm(t, e2e.Common)}, Args: []string{"--config", cfg}})
	c1, c2 := e2e.Client(t, h1.Addr), e2e.Client(t, h2.Addr)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, batch := range []string{`[1, 2, 3]`, `[{"value": 10}, "x", 4]`} {
		resp, err := c1.Invoke(ctx, &hostv1.InvokeRequest{Module: "common", Component: "split", Port: "in", Payload: []byte(batch)})
		require.NoError(t, err)
		assert.JSONEq(t, `{"count":3}`, string(resp.GetPayload()))
		assert.Empty(t, resp.GetEmitted(), "a wired emit is delivered, not returned")
	}

	// The emits are sends: they arrive on host 2 soon after the replies.
	var total string
	require.Eventually(t, func() bool {
		resp, err := c2.Invoke(ctx, &hostv1.InvokeRequest{Module: "tally", Component: "counter", Port: "total"})
		require.NoError(t, err)
		total = string(resp.GetPayload())
		return total == `{"count":6,"sum":20}`
	}, 10*time.Second, 20*time.Millisecond, "total on host 2: %s", total)

	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	routes := e2e.Run(t, nil, tinyctl, "--addr", h1.Addr, "routes")
	require.Zero(t, routes.Code, routes.Stderr)
	t.Logf("tinyctl routes:\n%s", routes.Stdout)
	assert.Regexp(t, `tally\s+`+h2.Addr, routes.Stdout)
	wired := e2e.Run(t, nil, tinyctl, "--addr", h1.Addr, "wiring")
	require.Zero(t, wired.Code, wired.Stderr)
	t.Logf("tinyctl wiring:\n%s", wired.Stdout)
	assert.Regexp(t, `common/split/out\s+tally/counter/in`, wired.Stdout)

	wiring, err := c1.Wiring(ctx)
	require.NoError(t, err)
	require.Len(t, wiring.GetWires(), 1)
	assert.Equal(t, "common/split/out", wiring.GetWires()[0].GetFrom())
	assert.Equal(t, []string{"tally/counter/in"}, wiring.GetWires()[0].GetTo())
}
