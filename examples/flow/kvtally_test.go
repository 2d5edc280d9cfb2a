package flow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// kvTallyHost starts a host with args and loads kvtally into it, granted
// kv.
func kvTallyHost(t *testing.T, args ...string) *hostclient.Client {
	t.Helper()
	return loadKVTally(t, e2e.StartHost(t, e2e.HostOptions{Args: args}))
}

// loadKVTally loads kvtally into h, granted kv, and returns its client.
func loadKVTally(t *testing.T, h *e2e.Host) *hostclient.Client {
	t.Helper()
	c := e2e.Client(t, h.Addr)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := c.Load(ctx, hostclient.Module{Name: "kvtally", Wasm: e2e.WasmBytes(t, e2e.KVTally), Capabilities: []string{"kv"}})
	require.NoError(t, err)
	return c
}

// deliver sends item to kvtally/counter/in with the message ID id ("" for
// none).
func deliver(t *testing.T, c *hostclient.Client, item, id string) error {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req := &hostv1.InvokeRequest{Module: "kvtally", Component: "counter", Port: "in", Payload: []byte(item)}
	if id != "" {
		req.Metadata = []*hostv1.KeyValue{{Key: abi.MetaMessageID, Value: id}}
	}
	_, err := c.RPC().Invoke(ctx, req)
	return err
}

func kvTotal(t *testing.T, c *hostclient.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := c.RPC().Invoke(ctx, &hostv1.InvokeRequest{Module: "kvtally", Component: "counter", Port: "total", Payload: []byte("{}")})
	require.NoError(t, err)
	return string(resp.GetPayload())
}

// TestKVTallyOnce: on a standalone host (its state in --state-dir), one
// message ID delivered twice counts once; another ID counts; an item
// without an ID always counts.
func TestKVTallyOnce(t *testing.T) {
	dir := t.TempDir()
	c := kvTallyHost(t, "--state-dir", dir)
	require.NoError(t, deliver(t, c, `{"value":10}`, "m-1"))
	require.NoError(t, deliver(t, c, `{"value":10}`, "m-1"))
	assert.JSONEq(t, `{"count":1,"sum":10}`, kvTotal(t, c))
	require.NoError(t, deliver(t, c, `4`, "m-2"))
	require.NoError(t, deliver(t, c, `"x"`, ""))
	require.NoError(t, deliver(t, c, `"x"`, ""))
	assert.JSONEq(t, `{"count":4,"sum":14}`, kvTotal(t, c))
}

// TestKVTallyTwoHosts: two hosts on one nats-server process, kvtally on
// each sharing its bucket; every one of 300 message IDs is delivered to
// both hosts at the same time (two goroutines per host): each counts once.
func TestKVTallyTwoHosts(t *testing.T) {
	ns := e2e.StartNATSServer(t, e2e.NATSOptions{})
	hosts := []*hostclient.Client{kvTallyHost(t, "--nats-url", ns.URL), kvTallyHost(t, "--nats-url", ns.URL)}
	const n = 300
	var wg sync.WaitGroup
	for _, c := range hosts {
		for range 2 {
			wg.Go(func() {
				for i := range n {
					if err := deliver(t, c, fmt.Sprint(i), fmt.Sprintf("msg-%d", i)); err != nil {
						t.Errorf("deliver msg-%d: %v", i, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	want := fmt.Sprintf(`{"count":%d,"sum":%d}`, n, n*(n-1)/2)
	for _, c := range hosts {
		assert.JSONEq(t, want, kvTotal(t, c))
	}
}
