package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestWatchNeverReadEnds: a caller with the invoke role opens a Watch,
// takes its first event and reads no more. Once the host's events fill its
// flow window and its subscription, the Watch is ended rather than let
// miss an event, and said so in the log once: the caller, when it reads
// again, gets the events up to there and then ABORTED, which tells it to
// watch again, not a view of the host's modules that is silently stale.
// The health service's own subscription, which takes an event as a sign
// to look again, may fall behind when the machine is too busy to let it
// read as fast as the events come: that is logged once each time, not
// once per event (1,771 lines of 2,000 events before).
func TestWatchNeverReadEnds(t *testing.T) {
	var out e2e.LogBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
	e := newEnv(t, envOptions{host: host.Options{Logger: log}})
	// The Watch lists it first: its subscription is made by then.
	e.load(t, guest(t, "echo"), "", api.Limits{})
	// A small fixed window, so that the client holds little of what the
	// host sends.
	conn := dial(t, e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	w, err := hostv1.NewHostServiceClient(conn).Watch(ctx, &hostv1.WatchRequest{})
	require.NoError(t, err)

	// Failed loads are events of about 2 KiB each, with this name.
	name := strings.Repeat("n", 1<<10)
	fail := func() {
		_, err := e.h.Load(ctx, []byte("not wasm"), host.LoadOptions{Name: name})
		require.Error(t, err)
	}
	_, err = w.Recv() // echo: subscribed
	require.NoError(t, err)
	const events = 2000
	for range events {
		fail()
	}
	ended, behind := 0, 0
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.Contains(l, "watch ended: it fell behind"):
			ended++
		case strings.Contains(l, "subscriber is behind"):
			behind++
		}
	}
	assert.Equal(t, 1, ended, "the Watch's end is logged once")
	assert.Less(t, behind, events/4, "log lines of the events the health service missed, of %d events", events)

	got := 0
	for {
		ev, err := w.Recv()
		if err != nil {
			assert.Equal(t, codes.Aborted, status.Code(err), "%v", err)
			assert.Contains(t, status.Convert(err).Message(), "watch again")
			break
		}
		require.Equal(t, hostv1.WatchEvent_TYPE_FAILED, ev.GetType())
		got++
	}
	// What the subscription and the flow windows held: the subscription's
	// buffer at least, fewer than the events.
	assert.GreaterOrEqual(t, got, host.EventBuffer)
	assert.Less(t, got, events)
}
