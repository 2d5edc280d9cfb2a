package host_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestMemoryBudgetUpgradeWindow: three modules of two warm instances of
// 16 MiB hold 96 MiB of a budget of 112 MiB. An upgrade of a makes its
// new warm instances beside the old ones (held here in instantiation):
// the budget cannot hold both, and the upgrade goes on in the host's one
// window, counted (128 MiB held). An upgrade of b meanwhile is refused as
// busy, instead of building beside its old version too, uncounted; once
// a's upgrade is published the old version's instances are closed, the
// budget is back at 96 MiB, and b's upgrade goes through.
func TestMemoryBudgetUpgradeWindow(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 112 << 20},
		Limits:   api.Limits{MemoryPages: 256, MaxInstances: 2, MinInstances: new(2), IdleTimeout: time.Hour},
	})
	wasm := abitest.Guest(t, "slow")
	for _, name := range []string{"a", "b", "c"} {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name})
		require.NoError(t, err)
	}
	require.Equal(t, uint64(96<<20), h.MemoryHeld())

	// The second instance made from now on is a's new warm one (the
	// first describes it): it waits until released.
	var made atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	host.SetPanicHook(func(op string) {
		if op == "instantiate" && made.Add(1) == 2 {
			close(entered)
			<-release
		}
	})
	t.Cleanup(func() { host.SetPanicHook(nil) })
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	upgraded := make(chan error, 1)
	go func() {
		info, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "a"})
		if err == nil && !info.Upgraded {
			t.Error("a loaded anew, not upgraded")
		}
		upgraded <- err
	}()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("a's new warm instance was not made")
	}
	assert.Equal(t, uint64(128<<20), h.MemoryHeld(), "a's old and new warm instances counted")
	// The three modules' 6, and a's new first; its second is being made.
	assert.Equal(t, 7, host.LiveInstances(h))

	_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "b"})
	require.ErrorIs(t, err, api.ErrBusy, "b's upgrade beside a's")
	t.Log(err)
	assert.Equal(t, 7, host.LiveInstances(h), "b's refused upgrade left no instance")

	close(release)
	released = true
	require.NoError(t, <-upgraded)
	require.Eventually(t, func() bool { return h.MemoryHeld() == 96<<20 && host.LiveInstances(h) == 6 }, time.Minute, 10*time.Millisecond,
		"a's old instances closed and the window's share given back")
	info, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "b"})
	require.NoError(t, err)
	assert.True(t, info.Upgraded)
	assert.Equal(t, uint64(96<<20), h.MemoryHeld())
}

// TestMemoryBudgetUpgradeWindowTaken: the same three modules on a budget
// of 140 MiB. The upgrades of a and b each make their describing
// instance (128 MiB held); a joins beside b's and, its new warm
// instances beyond the budget, takes the host's window (held in making
// its second). b then joins with the window taken and is refused as
// busy at once, not built beyond the budget beside a; a's upgrade
// finishes, and the budget is back at 96 MiB.
func TestMemoryBudgetUpgradeWindowTaken(t *testing.T) {
	h, _ := newHost(t, host.Options{
		Capacity: host.Capacity{MemoryBytes: 140 << 20},
		Limits:   api.Limits{MemoryPages: 256, MaxInstances: 2, MinInstances: new(2), IdleTimeout: time.Hour},
	})
	wasm := abitest.Guest(t, "slow")
	for _, name := range []string{"a", "b", "c"} {
		_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name})
		require.NoError(t, err)
	}

	// Instantiations from now on, in order: a's describing instance,
	// b's, a's second warm one. Each waits for its gate.
	gates := [3]chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	entered := make(chan int, 3)
	var made atomic.Int32
	host.SetPanicHook(func(op string) {
		if op != "instantiate" {
			return
		}
		if n := int(made.Add(1)) - 1; n < len(gates) {
			entered <- n
			<-gates[n]
		}
	})
	t.Cleanup(func() { host.SetPanicHook(nil) })
	opened := 0
	defer func() {
		for _, g := range gates[opened:] {
			close(g)
		}
	}()
	reached := func(want int, what string) {
		t.Helper()
		select {
		case n := <-entered:
			require.Equal(t, want, n, what)
		case <-time.After(time.Minute):
			t.Fatal(what + " was not made")
		}
	}
	pass := func() {
		close(gates[opened])
		opened++
	}
	load := func(name string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: name})
			done <- err
		}()
		return done
	}

	a := load("a")
	reached(0, "a's describing instance")
	b := load("b")
	reached(1, "b's describing instance")
	assert.Equal(t, uint64(128<<20), h.MemoryHeld(), "96 MiB warm and two describing instances")
	pass() // a joins, and makes its second warm instance in the window
	reached(2, "a's second warm instance")
	assert.Equal(t, uint64(144<<20), h.MemoryHeld(), "a's old and new warm instances counted, and b's describing one")
	pass() // b joins
	err := <-b
	require.ErrorIs(t, err, api.ErrBusy, "b's upgrade beside a's in the window")
	t.Log(err)
	assert.Equal(t, uint64(128<<20), h.MemoryHeld(), "b's describing instance closed")

	pass()
	require.NoError(t, <-a)
	require.Eventually(t, func() bool { return h.MemoryHeld() == 96<<20 && host.LiveInstances(h) == 6 }, time.Minute, 10*time.Millisecond,
		"a's old instances closed and the window's share given back")
}
