package watchdog_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

type target struct {
	interrupts chan struct{}
	gone       atomic.Bool
}

func (t *target) Interrupt() { t.interrupts <- struct{}{} }
func (t *target) Gone() bool { return t.gone.Load() }

// TestWatchdog: an armed call is stopped at its deadline, when its
// context ends, when its module goes, or when the host closes, and End
// says which; one that ends in time is not. With no call armed the
// watchdog parks, its clock read on demand; it reaps parked or not, and a
// call that arms wakes it.
func TestWatchdog(t *testing.T) {
	var reaps atomic.Int64
	w := watchdog.Start(func(int64) { reaps.Add(1) }, 50*time.Millisecond)
	defer w.Stop()
	tg := &target{interrupts: make(chan struct{}, 1)}
	var c watchdog.Call
	w.Register(&c, tg)
	interrupted := func() {
		t.Helper()
		select {
		case <-tg.interrupts:
		case <-time.After(time.Minute):
			t.Fatal("the call was not interrupted")
		}
	}
	hour := int64(time.Hour)

	d := w.Clock() + hour
	w.Begin(&c, t.Context(), d)
	assert.Equal(t, d, c.Deadline())
	assert.Equal(t, int64(watchdog.Idle), c.End(t.Context(), d), "a call that ends in time")

	d = w.Clock() + int64(time.Millisecond)
	w.Begin(&c, t.Context(), d)
	interrupted()
	assert.Equal(t, int64(watchdog.Timeout), c.End(t.Context(), d))

	ctx, cancel := context.WithCancel(t.Context())
	d = w.Clock() + hour
	w.Begin(&c, ctx, d)
	assert.Equal(t, ctx, c.Context())
	cancel()
	interrupted()
	assert.Equal(t, int64(watchdog.Canceled), c.End(ctx, d))
	assert.Nil(t, c.Context())

	d = w.Clock() + hour
	w.Begin(&c, t.Context(), d)
	tg.gone.Store(true)
	interrupted()
	assert.Equal(t, int64(watchdog.Unloaded), c.End(t.Context(), d))
	tg.gone.Store(false)

	d = w.Clock() + hour
	w.Begin(&c, t.Context(), d)
	w.InterruptAll()
	interrupted()
	assert.Equal(t, int64(watchdog.Closed), c.End(t.Context(), d))

	require.Eventually(t, w.Parked, time.Minute, time.Millisecond, "never parked with no call armed")
	a := w.Clock()
	require.Eventually(t, func() bool { return w.Parked() && w.Clock() > a }, time.Minute, time.Millisecond,
		"a parked watchdog's clock is read on demand")
	now := time.Now()
	assert.WithinDuration(t, now, w.Time(w.At(now)), 0)
	r := reaps.Load()
	require.Eventually(t, func() bool { return reaps.Load() > r }, time.Minute, time.Millisecond, "no reap while parked")

	wakes := w.Wakes()
	d = w.Clock() + hour
	w.Begin(&c, t.Context(), d)
	require.Eventually(t, func() bool { return w.Wakes() > wakes && !w.Parked() }, time.Minute, time.Millisecond,
		"a call that arms does not wake a parked watchdog")
	c.End(t.Context(), d)

	n := 0
	w.Each(func(watchdog.Target) { n++ })
	assert.Equal(t, 1, n)
	w.Unregister(&c)
	w.Unregister(&c)
	n = 0
	w.Each(func(watchdog.Target) { n++ })
	assert.Zero(t, n)
}

// TestShortCalls: a call that begins and ends between two ticks keeps the
// watchdog ticking, as a call in flight does, so that a host answering
// short calls one at a time does not park and wake for every one. With
// reaps an hour apart, a watchdog that parked at once would not tick again.
func TestShortCalls(t *testing.T) {
	w := watchdog.Start(func(int64) {}, time.Hour)
	defer w.Stop()
	var c watchdog.Call
	w.Register(&c, &target{interrupts: make(chan struct{}, 1)})
	require.Eventually(t, w.Parked, time.Minute, time.Millisecond, "never parked with no call armed")

	wakes := w.Wakes()
	d := w.Clock() + int64(time.Hour)
	w.Begin(&c, t.Context(), d)
	assert.Equal(t, int64(watchdog.Idle), c.End(t.Context(), d))
	require.Eventually(t, func() bool { return w.Wakes() >= wakes+3 }, time.Minute, time.Millisecond,
		"the watchdog parked again at once after a short call")
	require.Eventually(t, w.Parked, time.Minute, time.Millisecond, "never parked after the call")
}
