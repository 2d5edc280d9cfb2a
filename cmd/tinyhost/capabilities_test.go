package main_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestCapabilities loads the hostcalls guest into a real daemon with each
// way of granting capabilities and calls every host function that needs
// one: what is not granted answers the guest status 3 (denied), which the
// guest returns as its error.
func TestCapabilities(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{})
	c, err := hostclient.New(h.Addr, hostclient.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	wasm := e2e.Guest(t, "hostcalls")

	calls := []struct{ port, payload string }{
		{"config", ""}, {"timer", "1000"}, {"send", "hostcalls/caller/log x"}, {"call", "hostcalls/caller/log x"},
	}
	tests := []struct {
		name    string
		caps    []string
		granted []string // of calls' ports
		listed  []string
	}{
		{"defaults", nil, []string{"config"}, []string{"log", "config"}},
		{"none", []string{}, nil, nil},
		{"timer", []string{"timer"}, []string{"timer"}, []string{"timer"}},
		{"all", []string{"log", "config", "timer", "messaging"}, []string{"config", "timer", "send", "call"},
			[]string{"log", "config", "timer", "messaging"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			resp, err := c.Load(ctx, hostclient.Module{Name: "hostcalls", Wasm: wasm, Capabilities: tc.caps})
			require.NoError(t, err)
			assert.ElementsMatch(t, tc.listed, resp.GetModule().GetCapabilities())
			for _, call := range calls {
				_, err := c.RPC().Invoke(ctx, &hostv1.InvokeRequest{
					Module: "hostcalls", Component: "caller", Port: call.port, Payload: []byte(call.payload),
				})
				if slices.Contains(tc.granted, call.port) {
					assert.NoError(t, err, call.port)
				} else if assert.Error(t, err, call.port) {
					assert.Contains(t, err.Error(), "status 3", call.port)
				}
			}
		})
	}
}
