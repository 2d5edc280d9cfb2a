package main_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host/api"
	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
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
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
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

// TestCapabilitiesNoneFromConfig: a daemon configured with an empty list
// grants nothing to a module whose load names no capability.
func TestCapabilitiesNoneFromConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "tinyhost.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("capabilities: []\n"), 0o644))
	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--config", cfg}})
	c, err := hostclient.New(h.Addr, hostclient.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	resp, err := c.Load(ctx, hostclient.Module{Name: "hostcalls", Wasm: e2e.Guest(t, "hostcalls")})
	require.NoError(t, err)
	assert.Empty(t, resp.GetModule().GetCapabilities())
	_, err = c.RPC().Invoke(ctx, &hostv1.InvokeRequest{Module: "hostcalls", Component: "caller", Port: "config"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "status 3")
}

// TestMessagingGrant: over gRPC, hostcalls granted messaging:a only calls
// module a and is denied b (status 3 in the guest, the reason naming the
// module, the target and the grant, in the caller's error and in the
// daemon's log); a malformed grant is INVALID_ARGUMENT naming it.
func TestMessagingGrant(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{})
	c, err := hostclient.New(h.Addr, hostclient.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	for _, name := range []string{"a", "b"} {
		_, err := c.Load(ctx, hostclient.Module{Name: name, Wasm: e2e.Guest(t, "echo")})
		require.NoError(t, err)
	}
	resp, err := c.Load(ctx, hostclient.Module{Name: "hostcalls", Wasm: e2e.Guest(t, "hostcalls"), Capabilities: []string{"log", "messaging:a"}})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"log", "messaging:a"}, resp.GetModule().GetCapabilities())

	call := func(to string) (*hostv1.InvokeResponse, error) {
		return c.RPC().Invoke(ctx, &hostv1.InvokeRequest{Module: "hostcalls", Component: "caller", Port: "call", Payload: []byte(to + "/in hi")})
	}
	out, err := call("a/echo")
	require.NoError(t, err)
	assert.Equal(t, "hi", string(out.GetPayload()))

	const reason = `module "hostcalls" may not message b/echo: granted messaging:a`
	_, err = call("b/echo")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "call: status 3: "+reason)
	// The log quotes the reason, escaping its quotes.
	require.Eventually(t, func() bool { return strings.Contains(h.Log(), "may not message b/echo: granted messaging:a") },
		time.Minute, 10*time.Millisecond, "the daemon logs the denial")

	_, err = c.Load(ctx, hostclient.Module{Name: "hostcalls", Wasm: e2e.Guest(t, "hostcalls"), Capabilities: []string{"messaging:b/echo/in"}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.ErrorContains(t, err, `capability "messaging:b/echo/in": target "b/echo/in": want module or module/component`)
}

// TestMaximaFlags: a load over a --maximum-* flag is refused with
// INVALID_ARGUMENT naming the bound; at it, it loads.
func TestMaximaFlags(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{
		"--maximum-instances", "4", "--maximum-call-timeout", "30s", "--maximum-memory-pages", "2048", "--maximum-message-bytes", "1048576",
	}})
	c, err := hostclient.New(h.Addr, hostclient.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	wasm := e2e.Guest(t, "echo")
	for _, tc := range []struct {
		name   string
		limits api.Limits
		want   string
	}{
		{"at the maxima", api.Limits{MaxInstances: 4, CallTimeout: 30 * time.Second, MemoryPages: 2048, MaxMessageSize: 1 << 20}, ""},
		{"instances", api.Limits{MaxInstances: 5}, "MaxInstances is 5, this host's maximum is 4 (Maxima.MaxInstances)"},
		{"call timeout", api.Limits{CallTimeout: time.Hour}, "CallTimeout is 1h0m0s, this host's maximum is 30s (Maxima.CallTimeout)"},
		{"memory", api.Limits{MemoryPages: 4096}, "MemoryPages is 4096, this host's maximum is 2048 (Maxima.MemoryPages)"},
		{"message size", api.Limits{MaxMessageSize: 2 << 20}, "MaxMessageSize is 2097152, this host's maximum is 1048576 (Maxima.MaxMessageSize)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			_, err := c.Load(ctx, hostclient.Module{Name: "echo", Wasm: wasm, Limits: tc.limits})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
