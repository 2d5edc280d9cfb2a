package state_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/state"
)

// TestDeletedStreamConsumed: a module whose streams another client
// deleted under its consumer is delivered the messages sent after they
// are made again.
func TestDeletedStreamConsumed(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	var r record
	stop, err := e.Consume(t.Context(), "m", r.handler("m"))
	require.NoError(t, err)
	t.Cleanup(stop)
	nc, err := nats.Connect(e.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	name, _, dead, _ := state.StreamNames("default", "m")
	require.NoError(t, js.DeleteStream(t.Context(), name))
	require.NoError(t, js.DeleteStream(t.Context(), dead))

	send := func() error {
		return e.Publish(t.Context(), "src", &abi.Message{Module: "m", Component: "c", Port: "p", Payload: []byte("x")})
	}
	_ = send()
	require.NoError(t, send())
	require.Eventually(t, func() bool { return r.count() >= 1 }, 5*time.Minute, 10*time.Millisecond, "delivered after the streams are made again")
}
