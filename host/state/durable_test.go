package state_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/state"
)

// record is a DurableHandler that keeps the ID of every message it
// handles, by the consumer that handled it.
type record struct {
	mu   sync.Mutex
	seen map[string][]string // ID → consumers
	n    int
}

func (r *record) handler(consumer string) func(context.Context, *abi.Message) error {
	return func(_ context.Context, m *abi.Message) error {
		id, _ := m.Get(abi.MetaMessageID)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.seen == nil {
			r.seen = map[string][]string{}
		}
		r.seen[id] = append(r.seen[id], consumer)
		r.n++
		return nil
	}
}

func (r *record) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func publish(t *testing.T, e *state.Engine, module string, n int) {
	t.Helper()
	for i := range n {
		msg := &abi.Message{Module: module, Component: "c", Port: "p", Payload: []byte("x"),
			Metadata: []abi.KV{{Key: abi.MetaMessageID, Value: "m" + strconv.Itoa(i)}}}
		require.NoError(t, e.Publish(t.Context(), "src", msg))
	}
}

// TestStreamNames: a module name of the longest, with every character a
// name may have, in the longest namespace, makes valid streams; names
// that differ only by "." and "_" keep apart.
func TestStreamNames(t *testing.T) {
	s, subj, d, dsubj := state.StreamNames("default", "a.b_c")
	assert.Equal(t, []string{"tinyhost_msg_default_a_db__c", "tinyhost.msg.default.a_db__c", "tinyhost_dead_default_a_db__c", "tinyhost.dead.default.a_db__c"}, []string{s, subj, d, dsubj})

	ns := strings.Repeat("n-", 31) + "n"
	long := "a" + strings.Repeat("._-9", 15) + "zz"
	require.NoError(t, abi.ValidName(long))
	e := open(t, state.Config{Dir: t.TempDir(), Namespace: ns})
	var r record
	for _, m := range []string{long, "a.b", "a_b"} {
		publish(t, e, m, 3)
		stop, err := e.Consume(t.Context(), m, r.handler(m))
		require.NoError(t, err, m)
		t.Cleanup(stop)
	}
	require.Eventually(t, func() bool { return r.count() == 9 }, 2*time.Minute, 5*time.Millisecond)
	for _, m := range []string{long, "a.b", "a_b"} {
		require.Eventually(t, func() bool {
			n, err := e.Pending(t.Context(), m)
			require.NoError(t, err)
			return n == 0
		}, 2*time.Minute, 5*time.Millisecond, m)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range 3 {
		assert.ElementsMatch(t, []string{long, "a.b", "a_b"}, r.seen["m"+strconv.Itoa(i)], "each module's m%d once, from its own stream", i)
	}
}

// TestSharedConsumer: two engines on one server, as two hosts sharing a
// store, consuming one module split its messages: each is handled once.
func TestSharedConsumer(t *testing.T) {
	a := open(t, state.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	b := open(t, state.Config{URL: a.ClientURL()})
	var r record
	for name, e := range map[string]*state.Engine{"a": a, "b": b} {
		stop, err := e.Consume(t.Context(), "m", r.handler(name))
		require.NoError(t, err)
		t.Cleanup(stop)
	}
	const n = 300
	publish(t, a, "m", n)
	require.Eventually(t, func() bool {
		p, err := a.Pending(t.Context(), "m")
		require.NoError(t, err)
		return r.count() >= n && p == 0
	}, 2*time.Minute, 5*time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Equal(t, n, r.n, "no message handled twice")
	assert.Len(t, r.seen, n)
}

// TestInProgress: a handler that runs longer than AckWait (as a module
// whose CallTimeout is longer may) keeps its message: it is delivered
// once, not again to another consumer meanwhile.
func TestInProgress(t *testing.T) {
	// The heartbeat goes every third of AckWait: only a stall of the
	// process longer than two thirds of it (over 5 s) redelivers.
	const ackWait = 8 * time.Second
	e := open(t, state.Config{Dir: t.TempDir(), AckWait: ackWait})
	var mu sync.Mutex
	deliveries := 0
	stop, err := e.Consume(t.Context(), "m", func(ctx context.Context, _ *abi.Message) error {
		mu.Lock()
		deliveries++
		mu.Unlock()
		// The work of a long handler: more than twice AckWait.
		select {
		case <-time.After(2*ackWait + ackWait/4):
		case <-ctx.Done():
		}
		return nil
	})
	require.NoError(t, err)
	t.Cleanup(stop)
	publish(t, e, "m", 1)
	// Delivered is counted once the server confirms the acknowledgement,
	// a moment after the message stops being pending: wait for the count.
	require.Eventually(t, func() bool {
		return e.Counts()["m"].Delivered == 1
	}, 2*time.Minute, 10*time.Millisecond, "the message acknowledged")
	n, err := e.Pending(t.Context(), "m")
	require.NoError(t, err)
	assert.Zero(t, n)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, deliveries)
	assert.Equal(t, uint64(0), e.Counts()["m"].Redelivered)
}
