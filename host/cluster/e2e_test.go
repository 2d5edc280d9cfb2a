package cluster_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestMain fails the package's tests when one leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(e2e.Runner(m)) }

// messaging is the flag that grants relay, the calling module, what it
// needs besides the defaults.
const messaging = "--capabilities=log,config,messaging"

// TestFailover: module hello on hosts 2 and 3, relay on host 1 calling it
// 1,000 times through host 1's router, and host 2 killed (SIGKILL) after
// 300 replies. Every call must end, with a reply or an error (a call held
// past its deadline ends in one), only calls in flight on host 2 may fail,
// and the calls after the kill go on through host 3.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hosts")
	}
	hello := e2e.Wasm(t, e2e.Hello)
	h2 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{hello}})
	h3 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{hello}})
	cfg := e2e.ConfigFile(t, fmt.Sprintf("routes:\n  hello: [%q, %q]\n", h2.Addr, h3.Addr))
	h1 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{e2e.Wasm(t, e2e.Relay)}, Args: []string{"--config", cfg, messaging}})
	c1 := e2e.Client(t, h1.Addr)

	const (
		calls    = 1000
		workers  = 8
		killAt   = 300
		deadline = 5 * time.Second
	)
	var (
		next     atomic.Int64
		tl       failoverTally
		kill     = make(chan struct{})
		killOnce sync.Once
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= calls; i = next.Add(1) {
				payload := fmt.Sprintf(`{"to":"hello/greeter/in","payload":{"name":"n%d"}}`, i)
				ctx, cancel := context.WithTimeout(t.Context(), deadline)
				start := time.Now()
				resp, err := c1.Invoke(ctx, &hostv1.InvokeRequest{Module: "relay", Component: "relay", Port: "call", Payload: []byte(payload)})
				cancel()
				want := fmt.Sprintf(`{"greeting":"Hello, n%d!"}`, i)
				if tl.record(resp, err, want, time.Since(start)) == killAt {
					killOnce.Do(func() { close(kill) })
				}
			}
		})
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-kill:
		h2.Signal(t, syscall.SIGKILL)
		tl.killed.Store(true)
	case <-ended: // fewer than killAt replies: the asserts below say so
	}
	<-ended

	t.Logf("calls %d: replies %d (%d after the kill), errors %d %v, slowest %v; first error: %v",
		calls, tl.ok.Load(), tl.afterKill.Load(), tl.failed.Load(), tl.codes, tl.slowest, tl.firstErr)
	assert.Equal(t, int64(calls), tl.ok.Load()+tl.failed.Load(), "every call ends with a reply or an error")
	assert.LessOrEqual(t, tl.failed.Load(), int64(workers), "only calls in flight on the killed host may fail")
	assert.Greater(t, tl.afterKill.Load(), int64(calls/2), "calls go on through host 3")
}

// failoverTally counts how TestFailover's calls ended.
type failoverTally struct {
	ok, failed, afterKill atomic.Int64
	killed                atomic.Bool

	mu       sync.Mutex
	codes    map[codes.Code]int
	firstErr error
	slowest  time.Duration
}

// record counts one call that took d, and returns the number of right
// replies so far when this one was right, else 0.
func (tl *failoverTally) record(resp *hostv1.InvokeResponse, err error, want string, d time.Duration) int64 {
	tl.mu.Lock()
	tl.slowest = max(tl.slowest, d)
	if err != nil {
		if tl.codes == nil {
			tl.codes = map[codes.Code]int{}
		}
		tl.codes[status.Code(err)]++
		if tl.firstErr == nil {
			tl.firstErr = err
		}
	}
	tl.mu.Unlock()
	if err != nil || string(resp.GetPayload()) != want {
		tl.failed.Add(1)
		return 0
	}
	if tl.killed.Load() {
		tl.afterKill.Add(1)
	}
	return tl.ok.Add(1)
}

// TestCycle: a on host 1 and b on host 2 call each other; the message stops
// at the hop limit with a clear error, and an unknown module is NOT_FOUND.
func TestCycle(t *testing.T) {
	relay := e2e.Wasm(t, e2e.Relay)
	h1 := e2e.StartHost(t, e2e.HostOptions{Args: []string{messaging}})
	h2 := e2e.StartHost(t, e2e.HostOptions{Args: []string{messaging}})
	c1, c2 := e2e.Client(t, h1.Addr), e2e.Client(t, h2.Addr)
	// Every hop holds an instance until the end: 16 hops, 8 on each side.
	limits := api.Limits{MaxInstances: 16}
	e2e.LoadModule(t, c1, "a", relay, limits)
	e2e.LoadModule(t, c2, "b", relay, limits)
	e2e.SetRoutes(t, c1, 1, map[string][]string{"b": {h2.Addr}})
	e2e.SetRoutes(t, c2, 1, map[string][]string{"a": {h1.Addr}})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	t.Run("hop limit", func(t *testing.T) {
		_, err := c1.Invoke(ctx, &hostv1.InvokeRequest{Module: "a", Component: "relay", Port: "bounce", Payload: []byte(`{"self":"a","peer":"b"}`)})
		require.Error(t, err)
		st := status.Convert(err)
		t.Logf("%s: %.300s", st.Code(), st.Message())
		assert.Equal(t, codes.FailedPrecondition, st.Code())
		assert.Contains(t, st.Message(), "hop limit 16 reached")
		assert.True(t, strings.HasPrefix(st.Message(), "a/relay/bounce: hop limit: call b/relay/bounce: hop limit: host "+h2.Addr+": call a/relay/bounce: hop limit: host "+h1.Addr+": "),
			"the message follows the path hop by hop: %.300s", st.Message())

		// One trace across both hosts: created at the first hop on host 1,
		// carried to host 2 and back, in the log lines about the message.
		// Host 2 logs a failed delivery after it has answered it: wait for the line.
		var m []string
		require.Eventually(t, func() bool {
			m = regexp.MustCompile(`"trace_id":"([0-9a-f]{32})"`).FindStringSubmatch(h2.Log())
			return m != nil
		}, time.Minute, 20*time.Millisecond, "host 2 logs the trace id")
		assert.Eventually(t, func() bool { return strings.Contains(h1.Log(), m[1]) },
			time.Minute, 20*time.Millisecond, "host 1 logs the same trace id")
	})
	t.Run("unknown module", func(t *testing.T) {
		start := time.Now()
		_, err := c1.Invoke(ctx, &hostv1.InvokeRequest{Module: "a", Component: "relay", Port: "call", Payload: []byte(`{"to":"nosuch/x/in","payload":{}}`)})
		require.Error(t, err)
		t.Logf("%v in %v", err, time.Since(start))
		assert.Equal(t, codes.NotFound, status.Code(err))
		// Each layer says what it adds once: the invoked port, the call its
		// guest made, why that failed.
		assert.Equal(t, `a/relay/call: not found: call nosuch/x/in: not found: module "nosuch" is not loaded here and has no route`, status.Convert(err).Message())
	})
	t.Run("routes", func(t *testing.T) {
		resp, err := c1.Routes(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), resp.GetGeneration())
		require.Len(t, resp.GetRoutes(), 1)
		assert.Equal(t, []string{h2.Addr}, resp.GetRoutes()[0].GetAddresses())
		_, err = c1.SetRoutes(ctx, 0, nil)
		require.NoError(t, err, "generation 0 is always accepted")
		e2e.SetRoutes(t, c1, 5, map[string][]string{"b": {h2.Addr}})
		_, err = c1.SetRoutes(ctx, 4, nil)
		assert.Equal(t, codes.FailedPrecondition, status.Code(err), "an older generation is refused")
		assert.ErrorIs(t, err, api.ErrStaleGeneration)
	})
}
