package guest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

type key struct{}

// TestCallContext: a call's context has its caller's values and deadline,
// is not done until ended, and ends once, with the error of the first
// cause: a timeout is DeadlineExceeded, any other Canceled, whether Done
// was asked for before or after.
func TestCallContext(t *testing.T) {
	deadline := time.Unix(1e9, 0)
	values := context.WithValue(t.Context(), key{}, "v")
	for _, tc := range []struct {
		cause int64
		want  error
	}{
		{watchdog.Timeout, context.DeadlineExceeded},
		{watchdog.Canceled, context.Canceled},
		{watchdog.Unloaded, context.Canceled},
		{watchdog.Closed, context.Canceled},
	} {
		for _, doneFirst := range []bool{false, true} {
			c := guest.NewCallContext(values, deadline)
			d, ok := c.Deadline()
			assert.True(t, ok)
			assert.Equal(t, deadline, d)
			assert.Equal(t, "v", c.Value(key{}))
			assert.NoError(t, c.Err())
			var done <-chan struct{}
			if doneFirst {
				done = c.Done()
				select {
				case <-done:
					t.Fatal("done before it was ended")
				default:
				}
			}
			c.End(tc.cause)
			other := int64(watchdog.Timeout)
			if tc.cause == watchdog.Timeout {
				other = watchdog.Canceled
			}
			c.End(other) // ended already: no effect
			if !doneFirst {
				done = c.Done()
			}
			<-done
			assert.ErrorIs(t, c.Err(), tc.want)
		}
	}
}
