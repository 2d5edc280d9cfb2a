package host_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestMemoryBudgetUpgradeBesideBusyWarm: a module of two warm instances
// of 32 MiB (64 of a budget of 100 MiB) serves two long calls, one on
// each. An upgrade makes the new version's two warm instances beside the
// old version's two busy ones, which stay until their calls end: 128 MiB
// of instances on a budget of 100. The upgrade must be refused as busy
// (try again when calls end), or the host must stay within its budget.
func TestMemoryBudgetUpgradeBesideBusyWarm(t *testing.T) {
	const capacity = 100 << 20
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: capacity},
		Limits:   api.Limits{MemoryPages: 512, MaxInstances: 2, MinInstances: new(2), IdleTimeout: time.Hour},
	})
	wasm := abitest.Guest(t, "slow")
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "a"})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := h.Invoke(ctx, api.Request{Module: "a", Component: "sleeper", Port: "in", Payload: []byte("60000")})
			done <- err
		}()
	}
	require.Eventually(t, func() bool { m, _ := h.Module("a"); return m.Pool.InUse == 2 }, time.Minute, 10*time.Millisecond)

	_, err = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "a"})
	alive := uint64(host.LiveInstances(h)) * 32 << 20
	t.Logf("upgrade: err %v; %d instances alive (%d MiB), %d MiB held, budget %d MiB",
		err, host.LiveInstances(h), alive>>20, h.MemoryHeld()>>20, capacity>>20)
	if err != nil {
		assert.ErrorIs(t, err, api.ErrBusy)
	}
	assert.LessOrEqual(t, h.MemoryHeld(), uint64(capacity), "memory held after the upgrade")
	assert.LessOrEqual(t, alive, uint64(capacity), "instances alive after the upgrade")
	cancel()
	for range 2 {
		assert.Error(t, <-done, "a call cancelled")
	}
}

// TestMemoryBudgetReloadHammer: calls on a host whose budget is mostly
// spent (one busy instance of 48 MiB holds half of 100 MiB), many refused, while the
// module they call is reloaded again and again. Once the calls end and
// every module is unloaded, the host must hold nothing of its budget:
// what it holds then is lost for good.
func TestMemoryBudgetReloadHammer(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 100 << 20},
		Limits:   api.Limits{MemoryPages: 768, MaxInstances: 4, MinInstances: new(0), IdleTimeout: time.Hour, QueueTimeout: time.Millisecond},
	})
	wasm := abitest.Guest(t, "slow")
	for _, name := range []string{"hog", "a"} {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var hog sync.WaitGroup
	hog.Go(func() {
		_, _ = h.Invoke(ctx, api.Request{Module: "hog", Component: "sleeper", Port: "in", Payload: []byte("60000")})
	})
	require.Eventually(t, func() bool { m, _ := h.Module("hog"); return m.Pool.InUse == 1 }, time.Minute, 10*time.Millisecond)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = h.Invoke(t.Context(), api.Request{Module: "a", Component: "sleeper", Port: "in", Payload: []byte("0")})
			}
		})
	}
	for range 40 {
		_, _ = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "a"})
	}
	close(stop)
	wg.Wait()
	cancel()
	hog.Wait()
	for _, name := range []string{"hog", "a"} {
		require.NoError(t, h.Unload(t.Context(), name))
	}
	ok := assert.Eventually(t, func() bool { return h.MemoryHeld() == 0 && host.LiveInstances(h) == 0 }, time.Minute, 10*time.Millisecond)
	t.Logf("after every module unloaded: %d MiB held, %d instances alive (eventually zero: %v)", h.MemoryHeld()>>20, host.LiveInstances(h), ok)
}

// TestMemoryBudgetChurnHammer: loads (some at zero instances, some warm)
// and unloads of a few names at once, with calls cancelled at random
// points and calls that trap, on a budget too small for all of them.
// Once everything is unloaded, the host holds nothing of its budget.
func TestMemoryBudgetChurnHammer(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 200 << 20},
		Limits:   api.Limits{MemoryPages: 768, MaxInstances: 3, MinInstances: new(0), IdleTimeout: time.Hour, QueueTimeout: time.Millisecond},
	})
	wasm := abitest.Guest(t, "slow")
	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "seed"})
	require.NoError(t, err)
	names := []string{"p", "q", "r"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(j%7)*time.Millisecond)
				payload := []byte("3")
				_, _ = h.Invoke(ctx, api.Request{Module: names[(i+j)%len(names)], Component: "sleeper", Port: "in", Payload: payload})
				cancel()
			}
		})
	}
	for k := range 60 {
		name := names[k%len(names)]
		if k%5 == 4 {
			_ = h.Unload(t.Context(), name)
			continue
		}
		_, _ = h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name, Limits: api.Limits{MinInstances: new(k % 2)}})
	}
	close(stop)
	wg.Wait()
	for _, name := range append(names, "seed") {
		_ = h.Unload(t.Context(), name)
	}
	ok := assert.Eventually(t, func() bool { return h.MemoryHeld() == 0 && host.LiveInstances(h) == 0 }, time.Minute, 10*time.Millisecond)
	t.Logf("after every module unloaded: %d MiB held, %d instances alive (eventually zero: %v)", h.MemoryHeld()>>20, host.LiveInstances(h), ok)
}

// TestMemoryBudgetDescribePanics: wazero panicking as a load makes its
// describing instance fails the load and gives back the share that
// instance took, at zero instances and warm alike.
func TestMemoryBudgetDescribePanics(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 100 << 20},
		Limits:   api.Limits{MemoryPages: 512, MaxInstances: 2, IdleTimeout: time.Hour},
	})
	wasm := abitest.Guest(t, "slow")
	host.SetPanicHook(func(op string) {
		if op == "instantiate" {
			panic("wazero")
		}
	})
	t.Cleanup(func() { host.SetPanicHook(nil) })
	for i, min := range []int{0, 1} {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: fmt.Sprintf("m%d", i), Limits: api.Limits{MinInstances: new(min)}})
		require.Error(t, err)
		t.Log(err)
		assert.Zero(t, h.MemoryHeld(), "after a load whose instance panicked, MinInstances %d", min)
	}
}
