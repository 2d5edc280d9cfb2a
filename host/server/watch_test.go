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
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestWatchNeverReadLogsOnce: a caller with the invoke role opens a Watch,
// takes its first event and reads no more. Once the host's events fill its
// flow window and its subscription, every further event is dropped for
// it, and said so in the log once, not once per event: a caller holding
// MaxStreamsPerCredential such Watches would otherwise write that many log
// lines for every event of the host.
func TestWatchNeverReadLogsOnce(t *testing.T) {
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
	lines := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "subscriber is behind") {
			lines++
		}
	}
	// A line each time a subscriber falls behind, not one per event missed
	// (1,771 of 2,000 before): the Watch, which the client's flow windows
	// let take a few events after its first drop, and the health service's
	// own subscription, which falls behind only when the machine is too
	// busy to let it read as fast as the events come.
	assert.Positive(t, lines, "the events the Watch missed are logged")
	assert.Less(t, lines, events/4, "log lines of the events missed, of %d events", events)
}
