package state_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/state"
)

// TestForeignMessage: bytes that are no message, put on a module's stream
// subject by another client of the store, are never handed to the module;
// they are a dead letter that the operator sees, with the reason and the
// bytes, rather than one that fills the dead letters unseen.
func TestForeignMessage(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0", MaxAttempts: 2})
	var r record
	stop, err := e.Consume(t.Context(), "m", r.handler("m"))
	require.NoError(t, err)
	t.Cleanup(stop)

	nc, err := nats.Connect(e.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	_, subject, _, _ := state.StreamNames("default", "m")
	require.NoError(t, nc.Publish(subject, []byte("not a message")))

	var dead []host.DeadLetter
	require.Eventually(t, func() bool {
		dead, err = e.DeadLetters(t.Context(), "m", 0, 10)
		require.NoError(t, err)
		return len(dead) == 1
	}, 2*time.Minute, 5*time.Millisecond, "the foreign message listed as a dead letter")
	assert.Contains(t, dead[0].Error, "undecodable")
	assert.Equal(t, "not a message", string(dead[0].Message.Payload))
	assert.Equal(t, 0, r.count(), "never handed to the module")
}
