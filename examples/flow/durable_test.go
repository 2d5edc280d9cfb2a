package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestDurableFlowKill runs the durable flow over three hosts sharing one
// nats-server process: host 3 (the entry point) runs relay, which calls
// common/split/in on host 1, whose split/out is wired at least once (its
// config file) to kvtally/counter/in; kvtally runs on host 2, granted kv.
// 10,000 items go through split in batches; while they are being counted
// host 2 is killed (SIGKILL: its messages in flight are neither acked nor
// refused) and started again on the same flags. The total in KV reaches
// exactly 10,000 items and their sum, stays there once nothing is left in
// the stream or unacknowledged, and there are no dead letters.
func TestDurableFlowKill(t *testing.T) {
	const (
		batches   = 100
		batchSize = 100
		items     = batches * batchSize
	)
	start := time.Now()
	ns := e2e.StartNATSServer(t, e2e.NATSOptions{})
	// A short ack wait, so that what the killed host had pulled is
	// delivered again within seconds, not the default 30.
	durable := []string{"--nats-url", ns.URL, "--durable-ack-wait", "2s", "--metrics", "127.0.0.1:0"}

	h2args := append([]string{"--name", "h2"}, durable...)
	h2 := e2e.StartHost(t, e2e.HostOptions{Args: h2args})
	c2 := loadKVTally(t, h2)
	h1 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{e2e.Wasm(t, e2e.Common)}, Args: append([]string{"--name", "h1", "--config", e2e.ConfigFile(t, `wiring-at-least-once:
  common/split/out: [kvtally/counter/in]
`)}, durable...)})
	h3 := e2e.StartHost(t, e2e.HostOptions{Modules: []string{e2e.Wasm(t, e2e.Relay)}, Args: []string{"--name", "h3", "--capabilities=log,config,messaging", "--config", e2e.ConfigFile(t, fmt.Sprintf(`routes:
  common: [%q]
`, h1.Addr))}})
	c3 := e2e.Client(t, h3.Addr)

	// The items 0 … 9999, in batches through relay on host 3 to split
	// on host 1: each call returns once its batch is stored.
	sent := make(chan error, 1)
	go func() {
		for b := range batches {
			vals := make([]string, batchSize)
			for i := range vals {
				vals[i] = strconv.Itoa(b*batchSize + i)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			resp, err := c3.Invoke(ctx, &hostv1.InvokeRequest{Module: "relay", Component: "relay", Port: "call",
				Payload: fmt.Appendf(nil, `{"to": "common/split/in", "payload": [%s]}`, strings.Join(vals, ","))})
			cancel()
			if err == nil && string(resp.GetPayload()) != fmt.Sprintf(`{"count":%d}`, batchSize) {
				err = fmt.Errorf("split answered %s", resp.GetPayload())
			}
			if err != nil {
				sent <- fmt.Errorf("batch %d: %w", b, err)
				return
			}
		}
		sent <- nil
	}()

	// Kill host 2 once it has counted a tenth of the items, with more
	// pulled and in its handlers.
	var atKill total
	require.Eventually(t, func() bool {
		var err error
		atKill, err = readTotal(t.Context(), c2)
		return err == nil && atKill.Count >= items/10
	}, 5*time.Minute, 10*time.Millisecond, "kvtally counts a tenth of the items")
	require.Less(t, atKill.Count, items, "host 2 killed mid-run")
	h2.Signal(t, syscall.SIGKILL)
	require.NotZero(t, h2.Wait(t, time.Minute), "SIGKILL")
	killedAt := time.Since(start)

	h2 = e2e.StartHost(t, e2e.HostOptions{Args: h2args})
	c2 = loadKVTally(t, h2)
	require.NoError(t, <-sent)
	sentAt := time.Since(start)

	want := total{Count: items, Sum: items * (items - 1) / 2}
	var got total
	require.Eventually(t, func() bool {
		var err error
		got, err = readTotal(t.Context(), c2)
		return err == nil && got.Count >= items
	}, 10*time.Minute, 20*time.Millisecond, "kvtally counts every item; last: %+v", got)
	countedAt := time.Since(start)

	// Once the module's stream is empty and its consumer has nothing
	// delivered and unacknowledged, nothing can be counted any more:
	// the total then is final.
	nc, err := nats.Connect(ns.URL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "tinyhost_msg_default_kvtally")
		if err != nil {
			return false
		}
		si, err := s.Info(ctx)
		if err != nil {
			return false
		}
		ci, err := s.Consumer(ctx, "deliver")
		if err != nil {
			return false
		}
		info, err := ci.Info(ctx)
		return err == nil && si.State.Msgs == 0 && info.NumPending == 0 && info.NumAckPending == 0
	}, 5*time.Minute, 20*time.Millisecond, "the stream drained")
	got, err = readTotal(t.Context(), c2)
	require.NoError(t, err)
	assert.Equal(t, want, got, "each item counted once")

	dead := e2e.Run(t, nil, e2e.Binary(t, "cmd/tinyctl"), "--addr", h2.Addr, "deadletters", "list", "kvtally")
	require.Zero(t, dead.Code, dead.Stderr)
	assert.Equal(t, "SEQ  ID  TO  ATTEMPTS  ERROR\n", dead.Stdout, "no dead letters")

	published := durableCount(t, h1, "published")
	assert.Equal(t, items, published, "host 1 stored every item once")
	t.Logf("count %d at the kill (%v), batches stored by %v, %d counted by %v; restarted host 2: %d delivered, %d redelivered; total %v",
		atKill.Count, killedAt.Round(time.Millisecond), sentAt.Round(time.Millisecond), got.Count, countedAt.Round(time.Millisecond),
		durableCount(t, h2, "delivered"), durableCount(t, h2, "redelivered"), time.Since(start).Round(time.Millisecond))
}

type total struct {
	Count int     `json:"count"`
	Sum   float64 `json:"sum"`
}

// readTotal asks kvtally on c for its total.
func readTotal(ctx context.Context, c *hostclient.Client) (total, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := c.RPC().Invoke(ctx, &hostv1.InvokeRequest{Module: "kvtally", Component: "counter", Port: "total", Payload: []byte("{}")})
	if err != nil {
		return total{}, err
	}
	var tot total
	err = json.Unmarshal(resp.GetPayload(), &tot)
	return tot, err
}

// durableCount is h's tinyhost_durable_messages_total of kvtally for
// event, from its metrics.
func durableCount(t *testing.T, h *e2e.Host, event string) int {
	t.Helper()
	resp, err := http.Get("http://" + h.MetricsAddr(t) + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^tinyhost_durable_messages_total\{event="` + event + `",module="kvtally"\} (\d+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}
