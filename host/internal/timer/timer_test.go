package timer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/internal/timer"
)

// TestSet: a timer ticks its component until it is pruned or stopped; a
// module has at most `most` timers; a stopped set takes no timer until it
// resumes, and every goroutine it started has ended once stopped.
func TestSet(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	ticks := make(chan string, 16)
	stopped := make(chan string, 16)
	s := timer.New(ctx, &wg, "m", func(ctx context.Context, component string, _ time.Time) {
		select {
		case ticks <- component:
		default:
		}
		if component == "slow" {
			<-ctx.Done() // a tick that runs until Stop interrupts it
			stopped <- component
		}
	})
	next := func() string {
		t.Helper()
		select {
		case c := <-ticks:
			return c
		case <-time.After(time.Minute):
			t.Fatal("no tick")
			return ""
		}
	}

	require.NoError(t, s.Set("a", time.Millisecond, 2))
	assert.Equal(t, "a", next())
	require.NoError(t, s.Set("slow", time.Millisecond, 2))
	err := s.Set("c", time.Millisecond, 2)
	require.EqualError(t, err, `module "m" may have at most 2 timers running (MaxTimers)`)
	require.NoError(t, s.Set("a", time.Millisecond, 2), "the same interval again changes nothing")

	s.Prune(func(c string) bool { return c == "slow" })
	for c := next(); c != "slow"; c = next() {
	}

	s.Stop()
	assert.Equal(t, "slow", <-stopped, "Stop interrupts the tick that runs")
	require.NoError(t, s.Set("a", time.Millisecond, 2))
	wg.Wait() // nothing started after Stop; everything started has ended
	for len(ticks) > 0 {
		<-ticks
	}

	s.Resume()
	require.NoError(t, s.Set("a", time.Millisecond, 2))
	assert.Equal(t, "a", next())
	cancel() // the host closes
	wg.Wait()
}
