package watchdog_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// TestWatchdog: the watchdog sweeps while a call is armed, parks once none
// is, reads the clock on demand while parked, wakes when told, reaps at
// its own interval parked or not, and stops.
func TestWatchdog(t *testing.T) {
	var armed atomic.Bool
	var sweeps, reaps atomic.Int64
	armed.Store(true)
	w := watchdog.Start(func(int64) bool { sweeps.Add(1); return armed.Load() },
		func(int64) { reaps.Add(1) }, 50*time.Millisecond)

	require.Eventually(t, func() bool { return sweeps.Load() >= 3 }, time.Minute, time.Millisecond, "no sweeps while armed")
	assert.False(t, w.Parked(), "parked with a call armed")
	armed.Store(false)
	require.Eventually(t, w.Parked, time.Minute, time.Millisecond, "never parked")

	a := w.Clock()
	require.Eventually(t, func() bool { return w.Parked() && w.Clock() > a }, time.Minute, time.Millisecond,
		"a parked watchdog's clock is read on demand")
	now := time.Now()
	assert.WithinDuration(t, now, w.Time(w.At(now)), 0)

	r := reaps.Load()
	require.Eventually(t, func() bool { return reaps.Load() > r }, time.Minute, time.Millisecond, "no reap while parked")

	wakes := w.Wakes()
	armed.Store(true)
	w.Wake()
	require.Eventually(t, func() bool { return w.Wakes() > wakes && !w.Parked() }, time.Minute, time.Millisecond, "Wake did not wake it")
	w.Stop() // returns once its goroutine has ended
}
