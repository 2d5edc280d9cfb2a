package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/cluster"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// TestSetWiringRefusesABadWireAlone: one bad wire in a table over gRPC is
// named in the response and left out; the wires beside it are set.
func TestSetWiringRefusesABadWireAlone(t *testing.T) {
	e := newEnv(t, envOptions{routing: true})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
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

// TestSetWiringDelivery: a wire's delivery goes over gRPC both ways; an
// unknown one is refused with the wire alone.
func TestSetWiringDelivery(t *testing.T) {
	e := newEnv(t, envOptions{routing: true})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := e.client.SetWiring(ctx, &hostv1.SetWiringRequest{Generation: 1, Wires: []*hostv1.Wire{
		{From: "a/split/out", To: []string{"b/tally/in"}, Delivery: "at-least-once"},
		{From: "a/split/out", To: []string{"c/log/in"}},
		{From: "a/split/out", To: []string{"d/x/in"}, Delivery: "twice"},
	}})
	require.NoError(t, err)
	require.Len(t, resp.GetRefused(), 1)
	assert.Equal(t, "d/x/in", resp.GetRefused()[0].GetTo())
	assert.Contains(t, resp.GetRefused()[0].GetReason(), `delivery "twice"`)

	got, err := e.client.GetWiring(ctx, &hostv1.GetWiringRequest{})
	require.NoError(t, err)
	want := &hostv1.GetWiringResponse{Generation: 1, Wires: []*hostv1.Wire{
		{From: "a/split/out", To: []string{"b/tally/in"}, Delivery: "at-least-once"},
		{From: "a/split/out", To: []string{"c/log/in"}},
	}}
	assert.True(t, proto.Equal(want, got), "got %v", got)
}

// TestSetRoutesDelta: a delta over gRPC changes some modules' routes of
// the table at its base generation; over another base it is refused with
// FAILED_PRECONDITION (GENERATION_MOVED) and sets nothing, and with
// generation 0 it is INVALID_ARGUMENT. Each route's namespace is kept, and
// changed by a delta.
func TestSetRoutesDelta(t *testing.T) {
	tr := cluster.New(cluster.Options{})
	t.Cleanup(func() { tr.Close() }) // after the host closes
	e := newEnv(t, envOptions{routing: true, host: host.Options{Transport: tr}})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := client.New(e.addr, client.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	info, err := c.Info(ctx)
	require.NoError(t, err)
	assert.True(t, info.GetRouteDeltas(), "a host that serves its routes takes deltas")

	gen, err := c.SetRoutes(ctx, 10, []*hostv1.Route{
		{Module: "a", Addresses: []string{"127.0.0.1:1"}},
		{Module: "b", Addresses: []string{"127.0.0.1:2"}, Namespace: "team-a"},
	})
	require.NoError(t, err)
	assert.Equal(t, uint64(10), gen)
	gen, err = c.UpdateRoutes(ctx, 10, 11, []*hostv1.Route{
		{Module: "a"}, // removed
		{Module: "b", Addresses: []string{"127.0.0.1:3"}, Namespace: "team-b"},
		{Module: "c", Addresses: []string{"127.0.0.1:4"}},
	})
	require.NoError(t, err)
	assert.Equal(t, uint64(11), gen)
	want := &hostv1.GetRoutesResponse{Generation: 11, Routes: []*hostv1.Route{
		{Module: "b", Addresses: []string{"127.0.0.1:3"}, Namespace: "team-b"},
		{Module: "c", Addresses: []string{"127.0.0.1:4"}},
	}}
	got, err := c.Routes(ctx)
	require.NoError(t, err)
	assert.True(t, proto.Equal(want, got), "got %v", got)

	_, err = c.UpdateRoutes(ctx, 10, 12, []*hostv1.Route{{Module: "b"}})
	assert.ErrorIs(t, err, api.ErrGenerationMoved)
	wantStatus(t, err, codes.FailedPrecondition, api.ReasonGenerationMoved, "base")
	_, err = e.client.SetRoutes(ctx, &hostv1.SetRoutesRequest{Generation: 0, Delta: true, BaseGeneration: 11})
	wantStatus(t, err, codes.InvalidArgument, "", "generation")
	_, err = c.UpdateRoutes(ctx, 11, 12, []*hostv1.Route{{Module: "b"}, {Module: "b", Addresses: []string{"127.0.0.1:5"}}})
	wantStatus(t, err, codes.InvalidArgument, "", "routed twice")
	got, err = c.Routes(ctx)
	require.NoError(t, err)
	assert.True(t, proto.Equal(want, got), "refusals set nothing: got %v", got)
}
