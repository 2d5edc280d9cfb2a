package main_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// durableDaemon is a daemon with the durable test module loaded as name.
func durableDaemon(t *testing.T, name string, args ...string) *kvDaemon {
	t.Helper()
	h := e2e.StartHost(t, e2e.HostOptions{Args: args})
	c, err := hostclient.New(h.Addr, hostclient.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err = c.Load(ctx, hostclient.Module{Name: name, Wasm: e2e.WasmBytes(t, e2e.Durable), Capabilities: []string{"kv", "messaging"}})
	require.NoError(t, err)
	return &kvDaemon{h, c}
}

func (d *kvDaemon) invoke(t *testing.T, module, component, port, payload string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := d.c.RPC().Invoke(ctx, &hostv1.InvokeRequest{Module: module, Component: component, Port: port, Payload: []byte(payload)})
	require.NoError(t, err)
	return string(resp.GetPayload())
}

// TestDurableRestart: messages sent at least once to a module that no
// host loads yet are kept by a standalone daemon across SIGTERM and a
// start on its --state-dir, and delivered, each once, when the module is
// loaded there.
func TestDurableRestart(t *testing.T) {
	dir := t.TempDir()
	d := durableDaemon(t, "durable", "--state-dir", dir)
	const n = 25
	for i := range n {
		id := "r" + strconv.Itoa(i)
		require.Equal(t, "ok "+id, d.invoke(t, "durable", "src", "send", "tally/sink/in "+id+" x"))
	}
	d.h.Stop(t, 0)
	require.Equal(t, 0, d.h.Wait(t, time.Minute), d.h.Log())

	d = durableDaemon(t, "tally", "--state-dir", dir)
	require.Eventually(t, func() bool {
		return d.invoke(t, "tally", "kv", "get", "handled") == strconv.Itoa(n)
	}, 2*time.Minute, 10*time.Millisecond, "every message handled after the restart")
	for i := range n {
		assert.Equal(t, "1", d.invoke(t, "tally", "kv", "get", "handled.r"+strconv.Itoa(i)))
	}
}

// TestDurableNoStore: a daemon without a state store answers a send at
// least once with status unavailable, naming why.
func TestDurableNoStore(t *testing.T) {
	d := durableDaemon(t, "durable")
	assert.Equal(t, "unavailable: send tally/sink/in: unavailable: at least once: the host has no durable message store",
		d.invoke(t, "durable", "src", "send", "tally/sink/in n1 x"))
}

// TestDeadLettersCLI: a message whose handler fails every time is, after
// --durable-max-attempts deliveries, listed by tinyctl deadletters with
// its error, shown in full, and once the handler is fixed, replayed and
// handled; then there are no dead letters.
func TestDeadLettersCLI(t *testing.T) {
	d := durableDaemon(t, "durable", "--state-dir", t.TempDir(), "--durable-max-attempts", "2", "--durable-backoff", "10ms", "--metrics", "127.0.0.1:0")
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	ctl := func(args ...string) e2e.Result {
		t.Helper()
		res := e2e.Run(t, []string{"TINYCTL_ADDR=" + d.h.Addr}, tinyctl, args...)
		t.Logf("$ tinyctl %s (exit %d)\n%s%s", strings.Join(args, " "), res.Code, res.Stdout, res.Stderr)
		return res
	}
	require.Equal(t, "ok m1", d.invoke(t, "durable", "src", "send", "durable/sink/in m1 fail"))
	var list e2e.Result
	require.Eventually(t, func() bool {
		list = ctl("deadletters", "list", "durable")
		return list.Code == 0 && strings.Contains(list.Stdout, "m1")
	}, 2*time.Minute, 20*time.Millisecond, "the message in the dead letters")
	lines := strings.Split(strings.TrimSpace(list.Stdout), "\n")
	require.Len(t, lines, 2, list.Stdout)
	f := strings.Fields(lines[1])
	require.GreaterOrEqual(t, len(f), 5, lines[1])
	assert.Equal(t, []string{"m1", "durable/sink/in", "2"}, f[1:4])
	assert.Contains(t, lines[1], "boom 2")
	seq := f[0]

	show := ctl("deadletters", "show", "durable", seq)
	require.Equal(t, 0, show.Code, show.Stderr)
	assert.Contains(t, show.Stdout, "attempts:  2\n")
	assert.Contains(t, show.Stdout, `metadata:  tinyhost-message-id="m1"`)
	assert.Contains(t, show.Stdout, `payload:   "fail"`)

	d.invoke(t, "durable", "kv", "put", "fixed yes")
	replay := ctl("deadletters", "replay", "durable", seq)
	require.Equal(t, 0, replay.Code, replay.Stderr)
	require.Eventually(t, func() bool { return d.invoke(t, "durable", "kv", "get", "handled.m1") == "1" }, 2*time.Minute, 10*time.Millisecond)
	list = ctl("deadletters", "list", "durable")
	require.Equal(t, 0, list.Code, list.Stderr)
	assert.Equal(t, "SEQ  ID  TO  ATTEMPTS  ERROR\n", list.Stdout)
	again := ctl("deadletters", "replay", "durable", seq)
	assert.Equal(t, 3, again.Code, "NOT_FOUND: %s", again.Stderr)

	// Published once and again by the replay; delivered twice and
	// failed (the second a redelivery), dead-lettered, then delivered
	// once and acknowledged. The handler's write is seen before the
	// acknowledgement is confirmed and counted: wait for the count.
	want := []string{
		`tinyhost_durable_messages_total{event="published",module="durable"} 2`,
		`tinyhost_durable_messages_total{event="delivered",module="durable"} 1`,
		`tinyhost_durable_messages_total{event="redelivered",module="durable"} 1`,
		`tinyhost_durable_messages_total{event="dead_lettered",module="durable"} 1`,
	}
	var text string
	require.Eventually(t, func() bool {
		text = metricsText(t, d.h.MetricsAddr(t))
		return strings.Contains(text, want[1])
	}, 2*time.Minute, 10*time.Millisecond, "the replayed message counted delivered")
	for _, w := range want {
		assert.Contains(t, text, w)
	}
}

// TestDeadLettersCLIPages: more dead letters than a page of the host's
// answer holds (100) are all listed by tinyctl; delete removes one, and a
// second delete of it is NOT_FOUND (exit 3).
func TestDeadLettersCLIPages(t *testing.T) {
	d := durableDaemon(t, "durable", "--state-dir", t.TempDir(), "--durable-max-attempts", "1")
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	ctl := func(args ...string) e2e.Result {
		t.Helper()
		return e2e.Run(t, []string{"TINYCTL_ADDR=" + d.h.Addr}, tinyctl, args...)
	}
	const n = 101
	for i := range n {
		id := "p" + strconv.Itoa(i)
		require.Equal(t, "ok "+id, d.invoke(t, "durable", "src", "send", "durable/sink/in "+id+" fail"))
	}
	rows := func() []string {
		list := ctl("deadletters", "list", "durable")
		require.Equal(t, 0, list.Code, list.Stderr)
		return strings.Split(strings.TrimSpace(list.Stdout), "\n")[1:]
	}
	require.Eventually(t, func() bool { return len(rows()) == n }, 2*time.Minute, 50*time.Millisecond, "all %d dead letters listed", n)
	last := strings.Fields(rows()[n-1])
	del := ctl("deadletters", "delete", "durable", last[0])
	require.Equal(t, 0, del.Code, del.Stderr)
	assert.Len(t, rows(), n-1)
	del = ctl("deadletters", "delete", "durable", last[0])
	assert.Equal(t, 3, del.Code, "NOT_FOUND: %s", del.Stderr)
}

// TestDurableFlags: an ack wait under a second, and a negative bound, are
// usage errors (exit 2) naming the flag.
func TestDurableFlags(t *testing.T) {
	bin := e2e.Binary(t, "cmd/tinyhost")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state-dir", t.TempDir(), "--durable-ack-wait", "10ms"}, "durable-ack-wait 10ms is below 1s"},
		{[]string{"--state-dir", t.TempDir(), "--durable-max-attempts", "-1"}, "must not be negative"},
		{[]string{"--nats-url", "nats://127.0.0.1:1", "--state-max-bytes", "1000000"}, "state-max-bytes needs state-dir"},
	} {
		res := e2e.Run(t, nil, bin, c.args...)
		assert.Equal(t, 2, res.Code, "%v: %s", c.args, res.Stderr)
		assert.Contains(t, res.Stderr, c.want, c.args)
	}
}
