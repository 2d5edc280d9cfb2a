package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestResultBuffer: a host call's result longer than its out_cap goes into
// the region the guest's tinyhost_result_buffer hands out (g), or is
// pending when the export returns 0 (z); a region outside memory (o) or a
// host call from within the export (r, and s: result, whose answer would
// need the export again) fails the call as an ABI violation and costs the
// instance; a guest that exits from within the export (x) closes its
// instance under the call, which fails as a trap; a trap in it (u, d: a
// stack overflow) fails the call as any trap does, named by its first
// line, without wazero's stack trace, whose names are the guest's; one
// that grows memory (m) finds its result in the memory grown; a region
// that wraps past 2^32 (w) is outside memory. A failed export unwinds
// the guest's call at once: its handler logs nothing after the host call,
// nor runs on in unmapped memory. The module goes on serving.
func TestResultBuffer(t *testing.T) {
	h, sink := newHost(t, host.Options{})
	_, err := h.Load(loadCtx(t), fixture(t, "resultbuf"), host.LoadOptions{Capabilities: []string{abi.CapLog, abi.CapConfig}})
	require.NoError(t, err)
	for _, tc := range []struct {
		port string
		kind api.Kind
		msg  string
	}{
		{port: "g"},
		{port: "z"},
		{port: "o", kind: api.KindABIViolation, msg: "tinyhost_result_buffer: region [2147483632, +2) is outside memory"},
		{port: "r", kind: api.KindABIViolation, msg: "config: called from within tinyhost_result_buffer"},
		{port: "s", kind: api.KindABIViolation, msg: "result: called from within tinyhost_result_buffer"},
		{port: "x", kind: api.KindTrap, msg: "guest exited with code 4"},
		{port: "u", kind: api.KindTrap, msg: "unreachable"},
		{port: "m"},
		{port: "d", kind: api.KindTrap, msg: "stack overflow"},
		{port: "w", kind: api.KindABIViolation, msg: "tinyhost_result_buffer: region [4294967295, +2) is outside memory"},
		{port: "g"},
	} {
		t.Run(tc.port, func(t *testing.T) {
			before := afterLines(sink, "resultbuf", tc.port)
			resp, err := invoke(t, h, "resultbuf", "c", tc.port, nil)
			ran := afterLines(sink, "resultbuf", tc.port) - before
			if tc.kind == 0 {
				assert.Equal(t, 1, ran, "the handler ran on after the host call")
				require.NoError(t, err)
				assert.Equal(t, "{}", string(resp.Payload), "the configuration the host wrote")
				return
			}
			assert.Equal(t, tc.kind, kindOf(err), "%v", err)
			assert.ErrorContains(t, err, tc.msg)
			assert.NotContains(t, err.Error(), "\n", "one line, without wazero's stack trace of the guest's functions")
			assert.Zero(t, ran, "the handler ran on after the failed export")
		})
	}
}

// afterLines counts the lines "after <port>" module logged.
func afterLines(sink *logSink, module, port string) int {
	n := 0
	for _, l := range sink.of(module) {
		if l.line == "after "+port {
			n++
		}
	}
	return n
}

// TestCallReplyBuffer: the reply of a call to a module loaded here, longer
// than the caller's out_cap, goes into the region the caller's
// tinyhost_result_buffer hands out (g), or pending when it returns 0 (z).
// A failed export (o, r, x) unwinds the caller's call as for any host
// call, and the callee's one instance goes back to its pool all the same:
// the callee answers the next call.
func TestCallReplyBuffer(t *testing.T) {
	h, sink := newHost(t, host.Options{})
	wasm := fixture(t, "callbuf")
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Capabilities: []string{abi.CapLog, abi.CapConfig, abi.CapMessaging}})
	require.NoError(t, err)
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "callee", Limits: api.Limits{MaxInstances: 1}})
	require.NoError(t, err)
	const reply = "a reply written from the callee's memory"
	for _, tc := range []struct {
		port string
		kind api.Kind
		msg  string
	}{
		{port: "g"},
		{port: "z"},
		{port: "o", kind: api.KindABIViolation, msg: "tinyhost_result_buffer: region [2147483632, +40) is outside memory"},
		{port: "r", kind: api.KindABIViolation, msg: "config: called from within tinyhost_result_buffer"},
		{port: "x", kind: api.KindTrap, msg: "guest exited with code 4"},
		{port: "g"},
	} {
		t.Run(tc.port, func(t *testing.T) {
			before := afterLines(sink, "callbuf", tc.port)
			resp, err := invoke(t, h, "callbuf", "c", tc.port, nil)
			ran := afterLines(sink, "callbuf", tc.port) - before
			if tc.kind == 0 {
				assert.Equal(t, 1, ran, "the handler ran on after the call")
				require.NoError(t, err)
				assert.Equal(t, reply, string(resp.Payload), "the callee's reply")
				return
			}
			assert.Equal(t, tc.kind, kindOf(err), "%v", err)
			assert.ErrorContains(t, err, tc.msg)
			assert.Zero(t, ran, "the handler ran on after the failed export")
		})
	}
}

// TestCallReplyBufferCalleeFree: a caller's tinyhost_result_buffer, its
// own code, runs once the callee's instance is back in its pool: a caller
// whose export spins (s) holds no instance of the callee, which answers
// others meanwhile, though it has one instance only.
func TestCallReplyBufferCalleeFree(t *testing.T) {
	h, sink := newHost(t, host.Options{})
	wasm := fixture(t, "callbuf")
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{
		Capabilities: []string{abi.CapLog, abi.CapMessaging},
		Limits:       api.Limits{CallTimeout: 5 * time.Minute},
	})
	require.NoError(t, err)
	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "callee", Limits: api.Limits{MaxInstances: 1}})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	spun := make(chan error, 1)
	go func() {
		_, err := h.Invoke(ctx, api.Request{Module: "callbuf", Component: "c", Port: "s"})
		spun <- err
	}()
	require.Eventually(t, func() bool {
		for _, l := range sink.of("callbuf") {
			if l.line == "spin" {
				return true
			}
		}
		return false
	}, time.Minute, 10*time.Millisecond, "the caller's tinyhost_result_buffer runs")

	resp, err := invoke(t, h, "callee", "c", "e", nil)
	require.NoError(t, err, "the callee answers while the caller's export spins")
	assert.Equal(t, "a reply written from the callee's memory", string(resp.Payload))

	cancel()
	err = <-spun
	assert.Equal(t, api.KindCanceled, kindOf(err), "%v", err)
	assert.Zero(t, afterLines(sink, "callbuf", "s"), "the handler ran on after the stopped export")
}
