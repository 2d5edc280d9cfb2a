package hostv1_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// A route table crosses the wire sorted by module and comes back as it
// was; a module routed twice is refused.
func TestRoutesRoundTrip(t *testing.T) {
	routes := map[string][]string{"b": {"10.0.0.2:1", "10.0.0.1:1"}, "a": {"10.0.0.3:1"}}
	wire := hostv1.RoutesProto(routes)
	require.Len(t, wire, 2)
	assert.Equal(t, "a", wire[0].GetModule())
	assert.Equal(t, "b", wire[1].GetModule())
	got, err := hostv1.RoutesFromProto(wire)
	require.NoError(t, err)
	assert.Equal(t, routes, got)

	_, err = hostv1.RoutesFromProto(append(wire, &hostv1.Route{Module: "a"}))
	assert.EqualError(t, err, `module "a" is routed twice`)
	assert.Empty(t, hostv1.RoutesProto(nil))
}

// A route table with namespaces crosses the wire as RoutesProto's does,
// each module's namespace with it.
func TestRouteTableRoundTrip(t *testing.T) {
	routes := map[string]api.Route{"b": {Addrs: []string{"10.0.0.2:1"}, Namespace: "team-b"}, "a": {Addrs: []string{"10.0.0.3:1"}}}
	wire := hostv1.RouteTableProto(routes)
	require.Len(t, wire, 2)
	assert.Equal(t, "a", wire[0].GetModule())
	assert.Equal(t, "team-b", wire[1].GetNamespace())
	got, err := hostv1.RouteTableFromProto(wire)
	require.NoError(t, err)
	assert.Equal(t, routes, got)
	_, err = hostv1.RouteTableFromProto(append(wire, &hostv1.Route{Module: "a"}))
	assert.EqualError(t, err, `module "a" is routed twice`)
}

// A wiring table crosses the wire sorted by output port; the wires of an
// output port named twice are joined.
func TestWiresRoundTrip(t *testing.T) {
	wires := map[string][]string{"m/c/out": {"n/c/in"}, "a/c/out": {"x/c/in", "y/c/in"}}
	wire := hostv1.WiresProto(wires)
	require.Len(t, wire, 2)
	assert.Equal(t, "a/c/out", wire[0].GetFrom())
	assert.Equal(t, wires, hostv1.WiresFromProto(wire))

	joined := hostv1.WiresFromProto([]*hostv1.Wire{{From: "a/c/out", To: []string{"x/c/in"}}, {From: "a/c/out", To: []string{"y/c/in"}}})
	assert.Equal(t, map[string][]string{"a/c/out": {"x/c/in", "y/c/in"}}, joined)

	resp := hostv1.SetWiringResponseOf(&api.WiresRefused{Generation: 4, Refused: []api.RefusedWire{{From: "a/c/_tick", Reason: "system port"}}})
	assert.Equal(t, uint64(4), resp.GetGeneration())
	require.Len(t, resp.GetRefused(), 1)
	assert.Equal(t, "a/c/_tick", resp.GetRefused()[0].GetFrom())
	assert.Equal(t, "system port", resp.GetRefused()[0].GetReason())
}

// A limit past what its wire field carries is sent as the field's largest,
// never wrapped into a small one; a negative one as zero; min_instances 0
// stays present.
func TestLimitsClamped(t *testing.T) {
	l := hostv1.LimitsProto(api.Limits{
		MaxMessageSize:   1 << 40,
		CallTimeout:      math.MaxInt64,
		MaxInstances:     -1,
		MaxHTTPRedirects: -1,
		MinInstances:     new(0),
	})
	assert.Equal(t, uint32(math.MaxUint32), l.GetMaxMessageBytes())
	assert.Equal(t, uint32(math.MaxUint32), l.GetCallTimeoutMs())
	assert.Zero(t, l.GetMaxInstances())
	assert.Equal(t, int32(-1), l.GetMaxHttpRedirects())
	require.NotNil(t, l.MinInstances)
	assert.Zero(t, *l.MinInstances)

	assert.Nil(t, hostv1.LimitsProto(api.Limits{}), "all defaults: no field on the wire")
	back := hostv1.LimitsFromProto(l)
	require.NotNil(t, back.MinInstances)
	assert.Zero(t, *back.MinInstances)
	assert.Nil(t, hostv1.LimitsFromProto(&hostv1.ModuleLimits{}).MinInstances, "absent: the host's default")
}
