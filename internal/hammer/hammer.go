// Package hammer is what the concurrency tests share: Run starts many
// goroutines at once against the code under test, and NoLeaks checks that
// none of the goroutines a test started outlives it.
package hammer

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Run calls test(g, i) from p goroutines released at once, g numbering
// the goroutine and i its calls from 0. With n > 0 each goroutine makes n
// calls; with n == 0 it calls until meanwhile returns. meanwhile (nil for
// none) runs on the calling goroutine while they do; done is closed once
// every goroutine has stopped. A goroutine stops early when the test has
// failed; test reports with t.Error or assert, not with t.FailNow or
// require, which must run on the test's goroutine. Run returns when every
// goroutine has stopped.
func Run(t testing.TB, p, n int, test func(g, i int), meanwhile func(done <-chan struct{})) {
	t.Helper()
	if n == 0 && meanwhile == nil {
		panic("hammer: n == 0 calls until meanwhile returns, and meanwhile is nil")
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		stop  atomic.Bool
		done  = make(chan struct{})
	)
	for g := range p {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("hammer goroutine %d: panic: %v\n%s", g, r, debug.Stack())
				}
			}()
			<-start
			for i := 0; (n > 0 && i < n || n == 0 && !stop.Load()) && !t.Failed(); i++ {
				test(g, i)
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	close(start)
	defer func() {
		stop.Store(true) // with n == 0; with n > 0 stop is not looked at
		<-done
	}()
	if meanwhile != nil {
		meanwhile(done)
	}
}

// settle is how long the goroutines a test started have to end after it.
var settle = 10 * time.Second

// Since returns a check that fails t when a goroutine started after Since
// is still running settle after the check began, listing the goroutines.
func Since(t testing.TB) (check func()) {
	running := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		deadline := time.Now().Add(settle)
		for {
			// Find retries for a while before it answers.
			err := goleak.Find(running)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutines left behind: %v", err)
				return
			}
		}
	}
}

// NoLeaks checks, when the test and its cleanups registered after this
// call have run, that no goroutine it started is still running.
func NoLeaks(t testing.TB) { t.Cleanup(Since(t)) }
