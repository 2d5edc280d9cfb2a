package host_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/state"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// loadDurableAs loads the durable test module a second time under name.
func loadDurableAs(t *testing.T, h *host.Host, name string) {
	t.Helper()
	_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.Durable), host.LoadOptions{Name: name, Capabilities: []string{abi.CapKV, abi.CapMessaging}})
	require.NoError(t, err)
}

// TestDurableIDPerSender: the ID a sender sets drops only that sender's
// own duplicates: another module that sends the same target a message
// under the same ID, by chance or to have the first one's dropped, does
// not make either lost.
func TestDurableIDPerSender(t *testing.T) {
	eng := openState(t, state.Config{})
	h := durableHost(t, eng, eng)
	loadDurableAs(t, h, "other")

	assert.Equal(t, "ok x1", durableSend(t, h, "durable/sink/in", "x1", "a"))
	assert.Equal(t, "ok x1", durableSendFrom(t, h, "other", "durable/sink/in", "x1", "b"))
	waitFor(t, func() bool { return kvValue(t, eng, "durable", "handled") == "2" }, "both senders' messages handled")
	waitFor(t, func() bool { return pending(t, eng, "durable") == 0 }, "both acknowledged")
}

// TestDurableEmitIDPerEmitter: two modules each handling a message of the
// same ID (one sender's, sent to both) and emitting on a wire delivered
// at least once to the same target emit two messages, not one under one
// derived ID: the target sees two IDs, so that it drops neither as one
// it has seen.
func TestDurableEmitIDPerEmitter(t *testing.T) {
	eng := openState(t, state.Config{})
	h := durableHost(t, eng, eng)
	loadDurableAs(t, h, "other")
	require.NoError(t, h.SetWires(1, []host.Wire{
		{From: "durable/split/out", To: "durable/sink/in", Delivery: abi.DeliveryAtLeastOnce},
		{From: "other/split/out", To: "durable/sink/in", Delivery: abi.DeliveryAtLeastOnce},
	}))

	assert.Equal(t, "ok s1", durableSend(t, h, "durable/split/in", "s1", "x"))
	assert.Equal(t, "ok s1", durableSend(t, h, "other/split/in", "s1", "x"))
	waitFor(t, func() bool { return kvValue(t, eng, "durable", "handled") == "2" }, "both emits handled")
	// A split emits before it counts: the sink may have handled both
	// while other's split still runs, until other acknowledges.
	waitFor(t, func() bool { return pending(t, eng, "durable") == 0 && pending(t, eng, "other") == 0 }, "everything acknowledged")
	assert.Equal(t, "1", kvValue(t, eng, "other", "split.s1"))
	assert.Equal(t, "1", kvValue(t, eng, "durable", "split.s1"))
	b, err := eng.Bucket(t.Context(), "durable", host.KVQuota{MaxBytes: 16 << 20, MaxValueSize: 64 << 10})
	require.NoError(t, err)
	ids, _, err := b.Keys(t.Context(), "handled.", 10)
	require.NoError(t, err)
	assert.Len(t, ids, 2, "the IDs the target saw: %v", ids)
}

// unavailableDurable is a durable engine whose store refuses the first
// fails consumers, as one that is down or restarting when a module loads;
// then each consumer it starts is handed one message for durable/sink/in.
type unavailableDurable struct {
	fails     int
	mu        sync.Mutex
	calls     int
	delivered chan error
}

func (d *unavailableDurable) Publish(context.Context, string, *abi.Message) error {
	return errors.New("not here")
}

func (d *unavailableDurable) Consume(ctx context.Context, module string, handle host.DurableHandler) (func(), error) {
	d.mu.Lock()
	d.calls++
	n := d.calls
	d.mu.Unlock()
	if n <= d.fails {
		return nil, errors.New("nats: no responders available for request")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		msg := &abi.Message{Module: module, Component: "sink", Port: "in", Metadata: []abi.KV{{Key: abi.MetaMessageID, Value: "u1"}}, Payload: []byte("x")}
		d.delivered <- handle(context.WithoutCancel(ctx), msg)
	}()
	return func() { <-done }, nil
}

// TestDurableStoreDownAtLoad: a module loaded while the store refuses its
// consumer still has its stored messages delivered once the store is
// back, without being loaded again.
func TestDurableStoreDownAtLoad(t *testing.T) {
	eng := openState(t, state.Config{})
	d := &unavailableDurable{fails: 2, delivered: make(chan error, 1)}
	h, _ := newHost(t, host.Options{KV: eng, Durable: d})
	closeState(t, eng)
	_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.Durable), host.LoadOptions{Capabilities: []string{abi.CapKV, abi.CapMessaging}})
	require.NoError(t, err)
	select {
	case err := <-d.delivered:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("no consumer started after the store came back")
	}
	assert.Equal(t, "1", kvValue(t, eng, "durable", "handled.u1"))
}
