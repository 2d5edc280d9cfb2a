package host_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// spinLimits keep a spinning call alive for minutes, so that only the
// unload or the shutdown can be what stops it.
var spinLimits = api.Limits{CallTimeout: 5 * time.Minute, MinInstances: new(1), MaxInstances: 2}

// tickKinds records how the ticks of a module ended, as told to the
// Observer.
type tickKinds struct {
	mu    sync.Mutex
	kinds []api.Kind
}

func (r *tickKinds) CallDone(_, _, port string, kind api.Kind, _, _ time.Duration) {
	if port == abi.PortTick {
		r.mu.Lock()
		r.kinds = append(r.kinds, kind)
		r.mu.Unlock()
	}
}
func (r *tickKinds) Compiled(string, time.Duration, bool) {}
func (r *tickKinds) InstanceDiscarded(string, api.Kind)   {}

func (r *tickKinds) all() []api.Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.Kind(nil), r.kinds...)
}

// TestUnloadInterrupts unloads a module while a call of it spins, with a
// call timeout of minutes: the call ends at once (the test waits a minute
// at most, for liveness), as not found, saying the module was unloaded;
// and a tick that spins ends alike.
func TestUnloadInterrupts(t *testing.T) {
	ticks := &tickKinds{}
	h, _ := newHost(t, host.Options{Observer: ticks})
	wasm := fixture(t, "spin")
	inUse := func(n int) func() bool {
		return func() bool { info, _ := h.Module("spin"); return info.Pool.InUse == n }
	}

	t.Run("call", func(t *testing.T) {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Limits: spinLimits})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := h.Invoke(t.Context(), api.Request{Module: "spin", Component: "s", Port: "spin"})
			done <- err
		}()
		require.Eventually(t, inUse(1), time.Minute, time.Millisecond, "the call spins")
		start := time.Now()
		require.NoError(t, h.Unload(t.Context(), "spin"))
		select {
		case err := <-done:
			t.Logf("the spinning call ended %v after the unload began: %v", time.Since(start), err)
			assert.Equal(t, api.KindNotFound, kindOf(err))
			assert.ErrorIs(t, err, api.ErrNotFound)
			assert.ErrorContains(t, err, `module "spin" was unloaded while the call ran`)
		case <-time.After(time.Minute):
			t.Fatal("the spinning call still runs a minute after the unload")
		}
		require.Eventually(t, func() bool { return host.LiveInstances(h) == 0 }, time.Minute, time.Millisecond,
			"the unloaded module's instances close")
	})

	t.Run("tick", func(t *testing.T) {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Limits: spinLimits, Capabilities: []string{abi.CapTimer}})
		require.NoError(t, err)
		_, err = invoke(t, h, "spin", "s", "arm", nil)
		require.NoError(t, err)
		require.Eventually(t, inUse(1), time.Minute, time.Millisecond, "a tick spins")
		start := time.Now()
		require.NoError(t, h.Unload(t.Context(), "spin"))
		require.Eventually(t, func() bool { return len(ticks.all()) > 0 }, time.Minute, time.Millisecond,
			"the spinning tick still runs a minute after the unload")
		t.Logf("the spinning tick ended %v after the unload began", time.Since(start))
		assert.Contains(t, []api.Kind{api.KindNotFound, api.KindCanceled}, ticks.all()[0])
		require.Eventually(t, func() bool { return host.LiveInstances(h) == 0 }, time.Minute, time.Millisecond,
			"the unloaded module's instances close")
	})
}

// TestCloseInterruptsTicks closes a host while a tick spins, with a call
// timeout of minutes: Close returns well within its own deadline of a
// minute, without waiting for the tick's timeout, and the tick ends
// cancelled.
func TestCloseInterruptsTicks(t *testing.T) {
	ticks := &tickKinds{}
	h, err := host.New(t.Context(), host.Options{Observer: ticks, CacheDir: t.TempDir()})
	require.NoError(t, err)
	_, err = h.Load(loadCtx(t), fixture(t, "spin"), host.LoadOptions{Limits: spinLimits, Capabilities: []string{abi.CapTimer}})
	require.NoError(t, err)
	_, err = invoke(t, h, "spin", "s", "arm", nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { info, _ := h.Module("spin"); return info.Pool.InUse == 1 },
		time.Minute, time.Millisecond, "a tick spins")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	require.NoError(t, h.Close(ctx), "Close waited for the spinning tick until its own deadline")
	t.Logf("Close took %v", time.Since(start))
	assert.Equal(t, []api.Kind{api.KindCanceled}, ticks.all())
}
