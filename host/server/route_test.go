package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
)

// TestSetWiringRefusesABadWireAlone: one bad wire in a table over gRPC is
// named in the response and left out; the wires beside it are set.
func TestSetWiringRefusesABadWireAlone(t *testing.T) {
	e := newEnv(t, envOptions{routing: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := e.client.SetWiring(ctx, &hostv1.SetWiringRequest{Generation: 5, Wires: []*hostv1.Wire{
		{From: "a/split/out", To: []string{"b/counter/in", "b/counter/_settings"}},
		{From: "team2/x/_y", To: []string{"b/counter/in"}},
		{From: "c/x/out", To: []string{"d/y/in"}},
	}})
	require.NoError(t, err)
	assert.Equal(t, uint64(5), resp.GetGeneration())
	require.Len(t, resp.GetRefused(), 2)
	assert.Equal(t, "a/split/out", resp.GetRefused()[0].GetFrom())
	assert.Equal(t, "b/counter/_settings", resp.GetRefused()[0].GetTo())
	assert.Contains(t, resp.GetRefused()[0].GetReason(), `port "_settings"`)
	assert.Equal(t, "team2/x/_y", resp.GetRefused()[1].GetFrom())
	assert.Empty(t, resp.GetRefused()[1].GetTo())

	got, err := e.client.GetWiring(ctx, &hostv1.GetWiringRequest{})
	require.NoError(t, err)
	assert.Equal(t, uint64(5), got.GetGeneration())
	wires := map[string][]string{}
	for _, w := range got.GetWires() {
		wires[w.GetFrom()] = w.GetTo()
	}
	assert.Equal(t, map[string][]string{"a/split/out": {"b/counter/in"}, "c/x/out": {"d/y/in"}}, wires)
}
