package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// kvDaemon is a daemon with the kvstore test module loaded, granted kv.
type kvDaemon struct {
	h *e2e.Host
	c *hostclient.Client
}

func startKV(t *testing.T, args ...string) *kvDaemon {
	t.Helper()
	h := e2e.StartHost(t, e2e.HostOptions{Args: args})
	c, err := hostclient.New(h.Addr, hostclient.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err = c.Load(ctx, hostclient.Module{Name: "kvstore", Wasm: e2e.WasmBytes(t, e2e.KVStore), Capabilities: []string{"kv"}})
	require.NoError(t, err)
	return &kvDaemon{h, c}
}

// do makes the kvstore request req and returns its answer.
func (d *kvDaemon) do(t *testing.T, req string) string {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := d.c.RPC().Invoke(ctx, &hostv1.InvokeRequest{Module: "kvstore", Component: "kv", Port: "do", Payload: []byte(req)})
	if err != nil {
		return "error: " + err.Error()
	}
	return string(resp.GetPayload())
}

// natsURL is the URL the daemon's embedded NATS server accepts clients
// at, from its log.
func natsURL(t *testing.T, h *e2e.Host) string {
	for line := range strings.SplitSeq(h.Log(), "\n") {
		var rec struct {
			Message string `json:"@message"`
			URL     string `json:"url"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Message == "state store accepts NATS clients" {
			return rec.URL
		}
	}
	t.Fatalf("the daemon logged no NATS URL\n%s", h.Log())
	return ""
}

// TestStateTwoDaemons: two daemons on one nats-server process (built from
// go.mod's version, with JetStream), each with --nats-url; a module's
// replica on each increments one counter 1,000 times by compare-and-swap,
// over gRPC, at the same time: the count is 2,000 on both. The TLS case
// has the server ask for a client certificate, which the daemons present
// (--nats-ca, --nats-cert, --nats-key).
func TestStateTwoDaemons(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		ns := e2e.StartNATSServer(t, e2e.NATSOptions{})
		require.True(t, strings.HasPrefix(ns.URL, "nats://127.0.0.1:"), ns.URL)
		countTogether(t, startKV(t, "--nats-url", ns.URL), startKV(t, "--nats-url", ns.URL))
	})
	t.Run("tls", func(t *testing.T) {
		ca := e2e.NewCA(t, "nats-ca")
		cert, key := ca.Issue(t, e2e.Leaf{Name: "nats", IPs: []string{"127.0.0.1"}, Server: true})
		ns := e2e.StartNATSServer(t, e2e.NATSOptions{CertFile: cert, KeyFile: key, CAFile: ca.File})
		require.True(t, strings.HasPrefix(ns.URL, "tls://127.0.0.1:"), ns.URL)
		var ds []*kvDaemon
		for _, name := range []string{"host-a", "host-b"} {
			cert, key := ca.Issue(t, e2e.Leaf{Name: name, Client: true})
			ds = append(ds, startKV(t, "--nats-url", ns.URL, "--nats-ca", ca.File, "--nats-cert", cert, "--nats-key", key))
		}
		countTogether(t, ds[0], ds[1])
	})
}

// countTogether has a and b increment one counter 1,000 times each at the
// same time, and checks that both read 2,000.
func countTogether(t *testing.T, a, b *kvDaemon) {
	t.Helper()
	const each = 1000
	var wg sync.WaitGroup
	for _, d := range []*kvDaemon{a, b} {
		wg.Go(func() {
			for range each {
				if got := d.do(t, "incr counter"); !strings.HasPrefix(got, "ok ") {
					t.Errorf("incr: %s", got)
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Regexp(t, `^ok \d+ 2000$`, a.do(t, "get counter"))
	assert.Regexp(t, `^ok \d+ 2000$`, b.do(t, "get counter"))
}

// TestStateSharedEmbedded: a second daemon shares the first's embedded
// NATS server (--nats-listen on 127.0.0.1, the second with --nats-url):
// what one stores, the other reads.
func TestStateSharedEmbedded(t *testing.T) {
	a := startKV(t, "--state-dir", t.TempDir(), "--nats-listen", "127.0.0.1:0")
	url := natsURL(t, a.h)
	require.True(t, strings.HasPrefix(url, "nats://127.0.0.1:"), url)
	b := startKV(t, "--nats-url", url)
	require.Regexp(t, `^ok \d+$`, a.do(t, "put greeting hello"))
	assert.Regexp(t, `^ok \d+ hello$`, b.do(t, "get greeting"))
}

// TestStateRestart: a standalone daemon stopped with SIGTERM exits 0, and
// started again on its --state-dir, its module finds what it stored.
func TestStateRestart(t *testing.T) {
	dir := t.TempDir()
	d := startKV(t, "--state-dir", dir)
	require.Regexp(t, `^ok \d+$`, d.do(t, "put greeting hello"))
	require.Regexp(t, `^ok \d+$`, d.do(t, "put n 42"))
	d.h.Stop(t, 0)
	require.Equal(t, 0, d.h.Wait(t, time.Minute), d.h.Log())

	d = startKV(t, "--state-dir", dir)
	assert.Regexp(t, `^ok \d+ hello$`, d.do(t, "get greeting"))
	assert.Regexp(t, `^ok \d+ 42$`, d.do(t, "get n"))
}

// TestStateFlags: state flags that contradict each other, and an embedded
// NATS server listening past loopback without --insecure, are usage
// errors (exit 2) naming the flags.
func TestStateFlags(t *testing.T) {
	bin := e2e.Binary(t, "cmd/tinyhost")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state-dir", t.TempDir(), "--nats-url", "nats://127.0.0.1:4222"}, "state-dir and nats-url exclude each other"},
		{[]string{"--nats-listen", "127.0.0.1:0"}, "nats-listen needs state-dir"},
		{[]string{"--state-dir", t.TempDir(), "--nats-listen", "0.0.0.0:4222"}, "nats-listen 0.0.0.0:4222 is not a loopback address"},
		{[]string{"--nats-creds", "x.creds"}, "need nats-url"},
		{[]string{"--nats-url", "nats://127.0.0.1:1", "--nats-cert", "c.pem"}, "nats-cert and nats-key go together"},
	} {
		res := e2e.Run(t, nil, bin, c.args...)
		assert.Equal(t, 2, res.Code, "%v: %s", c.args, res.Stderr)
		assert.Contains(t, res.Stderr, c.want, c.args)
	}
}
