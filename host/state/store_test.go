package state_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/state"
)

// TestMaxStoreBytes: the embedded server keeps what fits in its store
// bound: with room for the streams of two modules (each two streams of
// 1 MiB), a send at least once to a third fails as a full store does,
// naming why, and the first two still take messages.
func TestMaxStoreBytes(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir(), MaxStreamBytes: 1 << 20, MaxStoreBytes: 4<<20 + 512<<10})
	send := func(module string) error {
		return e.Publish(t.Context(), "src", &abi.Message{Module: module, Component: "c", Port: "p", Payload: []byte("x")})
	}
	require.NoError(t, send("a"))
	require.NoError(t, send("b"))
	err := send("c")
	require.ErrorIs(t, err, host.ErrDurableFull)
	t.Log(err)
	assert.ErrorContains(t, err, "storage")
	require.NoError(t, send("a"))
	require.NoError(t, send("b"))
}
