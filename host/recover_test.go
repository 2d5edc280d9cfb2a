package host_test

import (
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// wat returns a hand-written fixture of testdata/wat, built from the .wat
// beside it.
func wat(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/wat/" + name + ".wasm")
	require.NoError(t, err)
	return b
}

// TestWasmRuntimePanic: a panic in wazero while a module is compiled,
// instantiated or called fails that load or call, naming the module, with
// an ABI violation; the instance is discarded and the host goes on serving.
// A module that declares more initial memory than its limit makes wazero
// panic for real (in its memory allocation, wazero v1.12.0); the other
// panics are made by a hook where wazero would panic.
func TestWasmRuntimePanic(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{})

	t.Run("initial memory above the limit", func(t *testing.T) {
		_, err := h.Load(loadCtx(t), abitest.Guest(t, "bigmemory"), host.LoadOptions{Name: "bigmem"})
		var le *api.LoadError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, "bigmem", le.Module)
		assert.Equal(t, api.KindMemory, le.Kind, "%v", err)
		assert.Contains(t, err.Error(), "4096 pages")
		assert.False(t, h.Loaded("bigmem"))
		mustEcho(t, h)
	})

	var armed atomic.Pointer[string] // the operation to panic in, once
	host.SetPanicHook(func(op string) {
		if want := armed.Load(); want != nil && *want == op && armed.CompareAndSwap(want, nil) {
			panic("wazero stand-in")
		}
	})
	t.Cleanup(func() { host.SetPanicHook(nil) })
	arm := func(op string) { armed.Store(&op) }

	for _, op := range []string{"compile", "instantiate", "call"} {
		t.Run("load: "+op, func(t *testing.T) {
			arm(op)
			_, err := h.Load(loadCtx(t), wat(t, "echo"), host.LoadOptions{Name: "panicky"})
			var le *api.LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, "panicky", le.Module)
			assert.Equal(t, api.KindABIViolation, le.Kind, "%v", err)
			assert.Contains(t, err.Error(), op+": the wasm runtime panicked: wazero stand-in")
			assert.Nil(t, armed.Load(), "the hook ran")
			assert.False(t, h.Loaded("panicky"))
			mustEcho(t, h)
		})
	}

	t.Run("invoke", func(t *testing.T) {
		_, err := h.Load(loadCtx(t), wat(t, "echo"), host.LoadOptions{Name: "panicky", Limits: api.Limits{MinInstances: new(1), MaxInstances: 1}})
		require.NoError(t, err)
		arm("call")
		_, err = invoke(t, h, "panicky", "c", "in", []byte("x"))
		var ce *api.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, api.CallError{Module: "panicky", Component: "c", Port: "in", Kind: api.KindABIViolation, Err: ce.Err}, *ce)
		assert.Contains(t, err.Error(), "the wasm runtime panicked: wazero stand-in")
		info, ok := h.Module("panicky")
		require.True(t, ok)
		assert.Equal(t, uint64(1), info.Pool.Discarded, "the instance is discarded")

		resp, err := invoke(t, h, "panicky", "c", "in", []byte("again"))
		require.NoError(t, err, "a new instance serves")
		assert.Equal(t, "again", string(resp.Payload))
		mustEcho(t, h)
	})
}
