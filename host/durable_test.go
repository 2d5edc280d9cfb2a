package host_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/state"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// durableHost is a host on eng, its state store, and on d, its durable
// engine (nil for none), with the durable module loaded; the host closes
// before the engine when the test ends.
func durableHost(t *testing.T, eng *state.Engine, d host.Durable) *host.Host {
	t.Helper()
	h, _ := newHost(t, host.Options{KV: eng, Durable: d})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		require.NoError(t, h.Close(ctx))
		require.NoError(t, eng.Close())
	})
	_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.Durable), host.LoadOptions{Capabilities: []string{abi.CapKV, abi.CapMessaging}})
	require.NoError(t, err)
	return h
}

// durableSend makes the durable module's src send body to address at
// least once with id ("-" for the host's) and returns its answer.
func durableSend(t *testing.T, h *host.Host, address, id, body string) string {
	t.Helper()
	return durableSendFrom(t, h, "durable", address, id, body)
}

// durableSendFrom is durableSend from module, the durable module loaded
// under another name.
func durableSendFrom(t *testing.T, h *host.Host, module, address, id, body string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := h.Invoke(ctx, api.Request{Module: module, Component: "src", Port: "send", Payload: []byte(address + " " + id + " " + body)})
	require.NoError(t, err)
	return string(resp.Payload)
}

// kvValue is the value of key in module's bucket on eng, "" for none.
func kvValue(t *testing.T, eng *state.Engine, module, key string) string {
	t.Helper()
	b, err := eng.Bucket(t.Context(), module, host.KVQuota{MaxBytes: 16 << 20, MaxValueSize: 64 << 10})
	require.NoError(t, err)
	v, _, err := b.Get(t.Context(), key)
	if err == host.ErrKVNotFound {
		return ""
	}
	require.NoError(t, err)
	return string(v)
}

// waitFor waits, generously, until cond holds.
func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 2*time.Minute, 5*time.Millisecond, msg)
}

func pending(t *testing.T, eng *state.Engine, module string) uint64 {
	n, err := eng.Pending(t.Context(), module)
	require.NoError(t, err)
	return n
}

// TestDurableDeadLetter: a message whose handler fails every time is
// delivered MaxAttempts times, then is a dead letter with its last error,
// its attempts, its ID and its trace context, and no longer pending.
func TestDurableDeadLetter(t *testing.T) {
	eng := openState(t, state.Config{MaxAttempts: 3, Backoff: 10 * time.Millisecond})
	h := durableHost(t, eng, eng)
	n, kept, err := h.CountDeadLetters(t.Context(), "durable")
	require.NoError(t, err)
	assert.True(t, kept)
	assert.Zero(t, n, "no dead-letter stream yet: none")

	assert.Equal(t, "ok m1", durableSend(t, h, "durable/sink/in", "m1", "fail"))
	var dead []host.DeadLetter
	waitFor(t, func() bool {
		var err error
		dead, err = eng.DeadLetters(t.Context(), "durable", 0, 10, 1<<20)
		require.NoError(t, err)
		return len(dead) > 0
	}, "the failing message in the dead letters")
	require.Len(t, dead, 1)
	d := dead[0]
	assert.Equal(t, 3, d.Attempts)
	assert.Contains(t, d.Error, "boom 3")
	id, _ := d.Message.Get(abi.MetaMessageID)
	assert.Equal(t, "m1", id)
	tp, ok := d.Message.Get(abi.MetaTraceparent)
	assert.True(t, ok && api.TraceID(tp) != "", "the dead letter keeps its trace context")
	_, asked := d.Message.Get(abi.MetaDelivery)
	assert.False(t, asked, "the stored message carries its ID, not the sender's ask")
	assert.Equal(t, "sink", d.Message.Component)
	assert.Equal(t, "fail", string(d.Message.Payload))
	assert.Equal(t, "3", kvValue(t, eng, "durable", "tries.m1"), "delivered exactly MaxAttempts times")
	// The handler saw the trace context the message was stored with.
	assert.Equal(t, tp, kvValue(t, eng, "durable", "trace.m1"))
	waitFor(t, func() bool { return pending(t, eng, "durable") == 0 }, "the dead letter leaves the module's stream")
	n, kept, err = h.CountDeadLetters(t.Context(), "durable")
	require.NoError(t, err)
	assert.True(t, kept)
	assert.Equal(t, uint64(1), n)

	// The handler fixed, the dead letter replayed: handled under its ID,
	// and no longer a dead letter.
	b, err := eng.Bucket(t.Context(), "durable", host.KVQuota{MaxBytes: 16 << 20, MaxValueSize: 64 << 10})
	require.NoError(t, err)
	_, err = b.Put(t.Context(), "fixed", []byte("yes"))
	require.NoError(t, err)
	require.NoError(t, h.ReplayDeadLetter(t.Context(), "durable", d.Seq))
	waitFor(t, func() bool { return kvValue(t, eng, "durable", "handled.m1") == "1" }, "the replayed message handled")
	assert.Equal(t, "4", kvValue(t, eng, "durable", "tries.m1"))
	dead, err = h.DeadLetters(t.Context(), "durable", 0, 10, 1<<20)
	require.NoError(t, err)
	assert.Empty(t, dead)
	n, _, err = h.CountDeadLetters(t.Context(), "durable")
	require.NoError(t, err)
	assert.Zero(t, n, "the replayed dead letter is counted no more")
	assert.ErrorIs(t, h.ReplayDeadLetter(t.Context(), "durable", d.Seq), host.ErrNoDeadLetter)
}

// TestDurableRetry: a handler that fails twice and then succeeds handles
// the message a third time, and it is acknowledged: nothing pending, no
// dead letter. The ID the host picks is the one the handler reads.
func TestDurableRetry(t *testing.T) {
	eng := openState(t, state.Config{MaxAttempts: 3, Backoff: 10 * time.Millisecond})
	h := durableHost(t, eng, eng)

	answer := durableSend(t, h, "durable/sink/in", "-", "flaky")
	require.True(t, strings.HasPrefix(answer, "ok "), answer)
	id := strings.TrimPrefix(answer, "ok ")
	assert.Len(t, id, 32, "a random ID of 16 bytes in hex")
	waitFor(t, func() bool { return kvValue(t, eng, "durable", "handled."+id) == "1" }, "the flaky message handled")
	waitFor(t, func() bool { return pending(t, eng, "durable") == 0 }, "the message acknowledged")
	assert.Equal(t, "3", kvValue(t, eng, "durable", "tries."+id))
	dead, err := eng.DeadLetters(t.Context(), "durable", 0, 10, 1<<20)
	require.NoError(t, err)
	assert.Empty(t, dead)
}

// TestDurableDuplicate: a message sent again with the ID of one already
// stored is dropped; another ID is not.
func TestDurableDuplicate(t *testing.T) {
	eng := openState(t, state.Config{})
	h := durableHost(t, eng, eng)

	for range 3 {
		assert.Equal(t, "ok d1", durableSend(t, h, "durable/sink/in", "d1", "x"))
	}
	assert.Equal(t, "ok d2", durableSend(t, h, "durable/sink/in", "d2", "x"))
	waitFor(t, func() bool { return kvValue(t, eng, "durable", "handled") == "2" }, "both messages handled")
	waitFor(t, func() bool { return pending(t, eng, "durable") == 0 }, "both acknowledged")
	assert.Equal(t, "1", kvValue(t, eng, "durable", "handled.d1"))
	assert.Equal(t, "1", kvValue(t, eng, "durable", "handled.d2"))
	assert.Equal(t, "2", kvValue(t, eng, "durable", "handled"), "the duplicates were never delivered")
}

// TestDurableFull: when the target's stream is full, the sender's send
// answers status unavailable, and every message it accepted before is
// stored.
func TestDurableFull(t *testing.T) {
	eng := openState(t, state.Config{MaxStreamBytes: 4 << 10})
	h := durableHost(t, eng, eng)

	body := strings.Repeat("x", 500)
	accepted := 0
	var answer string
	for i := range 100 {
		// "elsewhere" is loaded nowhere: its messages wait.
		answer = durableSend(t, h, "elsewhere/sink/in", "f"+strconv.Itoa(i), body)
		if !strings.HasPrefix(answer, "ok ") {
			break
		}
		accepted++
	}
	require.Less(t, accepted, 100, "a 4 KiB stream takes fewer than 100 messages of 500 bytes")
	assert.Greater(t, accepted, 0)
	assert.True(t, strings.HasPrefix(answer, "unavailable: "), answer)
	assert.Contains(t, answer, "store is full")
	assert.Equal(t, uint64(accepted), pending(t, eng, "elsewhere"))
}

// TestDurableSystemPort: a send at least once to a system port is denied,
// as one at most once is, and nothing is stored.
func TestDurableSystemPort(t *testing.T) {
	eng := openState(t, state.Config{})
	h := durableHost(t, eng, eng)
	answer := durableSend(t, h, "durable/sink/_settings", "p1", "{}")
	assert.True(t, strings.HasPrefix(answer, "denied: send durable/sink/_settings: denied: "), answer)
	assert.Equal(t, uint64(0), pending(t, eng, "durable"))
}

// TestDurableNoEngine: a send at least once on a host without a durable
// engine answers status unavailable with the reason, rather than going
// at most once.
func TestDurableNoEngine(t *testing.T) {
	eng := openState(t, state.Config{})
	h := durableHost(t, eng, nil)
	assert.Equal(t, "unavailable: send durable/sink/in: unavailable: at least once: the host has no durable message store",
		durableSend(t, h, "durable/sink/in", "n1", "x"))
	assert.Equal(t, "", kvValue(t, eng, "durable", "tries.n1"))
	_, err := h.DeadLetters(t.Context(), "durable", 0, 10, 1<<20)
	assert.ErrorIs(t, err, host.ErrNoDurable)
	n, kept, err := h.CountDeadLetters(t.Context(), "durable")
	require.NoError(t, err, "no store is an answer, not a failure")
	assert.False(t, kept)
	assert.Zero(t, n)
}

// TestDurableRestart: messages stored and not yet delivered when the host
// and its embedded store stop are delivered once both start again on the
// same directory.
func TestDurableRestart(t *testing.T) {
	dir := t.TempDir()
	eng := openState(t, state.Config{Dir: dir})
	const n = 20
	for i := range n {
		msg := &abi.Message{Module: "durable", Component: "sink", Port: "in", Payload: []byte("x"),
			Metadata: []abi.KV{{Key: abi.MetaMessageID, Value: fmt.Sprintf("r%d", i)}}}
		require.NoError(t, eng.Publish(t.Context(), "durable", msg))
	}
	require.NoError(t, eng.Close())

	eng = openState(t, state.Config{Dir: dir})
	durableHost(t, eng, eng)
	waitFor(t, func() bool { return kvValue(t, eng, "durable", "handled") == strconv.Itoa(n) }, "every stored message handled after the restart")
	waitFor(t, func() bool { return pending(t, eng, "durable") == 0 }, "every message acknowledged")
	for i := range n {
		assert.Equal(t, "1", kvValue(t, eng, "durable", fmt.Sprintf("handled.r%d", i)))
	}
}

// TestDurableWire: what is emitted on a wire delivered at least once is
// stored and retried as a send at least once is; and a handler of such a
// message that is delivered it again and emits the same emits it under
// the same ID, so the target handles it once.
func TestDurableWire(t *testing.T) {
	eng := openState(t, state.Config{MaxAttempts: 3, Backoff: 10 * time.Millisecond})
	h := durableHost(t, eng, eng)
	require.NoError(t, h.SetWires(1, []host.Wire{{From: "durable/split/out", To: "durable/sink/in", Delivery: abi.DeliveryAtLeastOnce}}))
	gen, wires := h.Wires()
	assert.Equal(t, uint64(1), gen)
	assert.Equal(t, []host.Wire{{From: "durable/split/out", To: "durable/sink/in", Delivery: abi.DeliveryAtLeastOnce}}, wires)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := h.Invoke(ctx, api.Request{Module: "durable", Component: "split", Port: "in", Payload: []byte("flaky")})
	require.NoError(t, err)
	waitFor(t, func() bool { return kvValue(t, eng, "durable", "handled") == "1" }, "the emitted message handled after its retries")

	// split is delivered "again" twice (it fails its first delivery
	// after it emitted): sink handles the emitted message once.
	assert.Equal(t, "ok s1", durableSend(t, h, "durable/split/in", "s1", "again"))
	waitFor(t, func() bool { return kvValue(t, eng, "durable", "split.s1") == "2" }, "split delivered twice")
	waitFor(t, func() bool { return pending(t, eng, "durable") == 0 }, "everything acknowledged")
	assert.Equal(t, "2", kvValue(t, eng, "durable", "handled"), "the emitted message's duplicate dropped")
}

// TestDurableWireRefused: a delivery other than at least once or none is
// refused, the rest of the wiring set.
func TestDurableWireRefused(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	err := h.SetWires(0, []host.Wire{
		{From: "a/c/out", To: "b/c/in", Delivery: "exactly-once"},
		{From: "a/c/out", To: "d/c/in"},
	})
	var refused *api.WiresRefused
	require.ErrorAs(t, err, &refused)
	require.Len(t, refused.Refused, 1)
	assert.Equal(t, "b/c/in", refused.Refused[0].To)
	assert.Contains(t, refused.Refused[0].Reason, `delivery "exactly-once"`)
	_, wiring := h.Wiring()
	assert.Equal(t, map[string][]string{"a/c/out": {"d/c/in"}}, wiring)
}

// gatedDurable is eng, whose deliveries to the module gated wait, once
// each has begun (entered), until release closes; stopping announces
// that the module's consumer is being stopped.
type gatedDurable struct {
	*state.Engine
	gated             string
	entered, stopping chan struct{}
	release           chan struct{}
}

func (g *gatedDurable) Consume(ctx context.Context, module string, handle host.DurableHandler) (func(), error) {
	if module != g.gated {
		return g.Engine.Consume(ctx, module, handle)
	}
	stop, err := g.Engine.Consume(ctx, module, func(ctx context.Context, msg *abi.Message) error {
		g.entered <- struct{}{}
		<-g.release
		return handle(ctx, msg)
	})
	if err != nil {
		return nil, err
	}
	return func() { close(g.stopping); stop() }, nil
}

// TestUnloadWaitsAlone: unloading a module waits for its delivery in
// flight, and meanwhile another module loads (and starts consuming its
// own stored messages) without waiting for it.
func TestUnloadWaitsAlone(t *testing.T) {
	eng := openState(t, state.Config{})
	g := &gatedDurable{Engine: eng, gated: "slow", entered: make(chan struct{}, 1), stopping: make(chan struct{}), release: make(chan struct{})}
	h := durableHost(t, eng, g)
	var released bool
	release := func() {
		if !released {
			released = true
			close(g.release)
		}
	}
	t.Cleanup(release)
	_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.Durable), host.LoadOptions{Name: "slow", Capabilities: []string{abi.CapKV, abi.CapMessaging}})
	require.NoError(t, err)
	require.Equal(t, "ok m1", durableSend(t, h, "slow/sink/in", "m1", "x"))
	<-g.entered

	unloaded := make(chan error, 1)
	go func() { unloaded <- h.Unload(context.WithoutCancel(t.Context()), "slow") }()
	<-g.stopping // the unload waits for the delivery in flight

	loaded := make(chan error, 1)
	go func() {
		_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.Durable), host.LoadOptions{Name: "other", Capabilities: []string{abi.CapKV, abi.CapMessaging}})
		loaded <- err
	}()
	select {
	case err := <-loaded:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("a load waited for another module's unload to finish its delivery")
	}
	select {
	case err := <-unloaded:
		t.Fatalf("the unload returned (%v) while its delivery ran", err)
	default:
	}
	release()
	require.NoError(t, <-unloaded)
}
