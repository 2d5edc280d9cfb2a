package hammer_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/internal/hammer"
)

const (
	testTimeout = 10 * time.Second
	tick        = time.Millisecond
)

func TestRun(t *testing.T) {
	t.Run("n calls from each goroutine, all running at once", func(t *testing.T) {
		var calls atomic.Int64
		var mu sync.Mutex
		seen := map[string]bool{}
		barrier := make(chan struct{})
		var arrived atomic.Int64
		hammer.Run(t, 4, 10, func(g, i int) {
			if i == 0 && arrived.Add(1) == 4 {
				close(barrier) // every goroutine made its first call
			}
			if i == 0 {
				select {
				case <-barrier:
				case <-time.After(testTimeout):
					t.Errorf("goroutine %d: the others did not run meanwhile", g)
				}
			}
			calls.Add(1)
			mu.Lock()
			seen[fmt.Sprint(g, i)] = true
			mu.Unlock()
		}, nil)
		assert.EqualValues(t, 40, calls.Load())
		assert.Len(t, seen, 40)
	})
	t.Run("until meanwhile returns", func(t *testing.T) {
		var calls atomic.Int64
		hammer.Run(t, 3, 0, func(int, int) { calls.Add(1) }, func(done <-chan struct{}) {
			require.Eventually(t, func() bool { return calls.Load() > 100 }, testTimeout, tick)
			select {
			case <-done:
				t.Error("the goroutines stopped before meanwhile returned")
			default:
			}
		})
		after := calls.Load()
		assert.Never(t, func() bool { return calls.Load() != after }, 50*tick, tick, "calls after Run returned")
	})
	t.Run("done closes when the goroutines are through", func(t *testing.T) {
		hammer.Run(t, 2, 5, func(int, int) {}, func(done <-chan struct{}) {
			select {
			case <-done:
			case <-time.After(testTimeout):
				t.Error("done not closed")
			}
		})
	})
}

// recorder is a testing.TB that keeps what it was told to report.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestSince(t *testing.T) {
	t.Run("a goroutine that ends", func(t *testing.T) {
		rec := &recorder{TB: t}
		check := hammer.Since(rec)
		ended := make(chan struct{})
		go func() { <-ended }()
		close(ended)
		check()
		assert.Empty(t, rec.errors)
	})
	t.Run("a goroutine left running", func(t *testing.T) {
		defer hammer.SetSettle(time.Second)()
		rec := &recorder{TB: t}
		check := hammer.Since(rec)
		release := make(chan struct{})
		go leaked(release)
		check()
		close(release)
		require.Len(t, rec.errors, 1)
		assert.Contains(t, rec.errors[0], "hammer_test.leaked")
	})
}

func leaked(release chan struct{}) { <-release }
