package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

func rt(module string, addrs ...string) *hostv1.Route {
	return &hostv1.Route{Module: module, Addresses: addrs}
}

// TestRoutesDiff: the delta from one sorted table to another adds,
// changes and removes routes (a removal has no addresses), and is empty
// between equal tables.
func TestRoutesDiff(t *testing.T) {
	from := []*hostv1.Route{rt("a", "h:1"), rt("b", "h:1"), rt("c", "h:1", "h:2"), rt("e", "h:1")}
	for _, tc := range []struct {
		name     string
		from, to []*hostv1.Route
		want     []*hostv1.Route
	}{
		{"identical", from, []*hostv1.Route{rt("a", "h:1"), rt("b", "h:1"), rt("c", "h:1", "h:2"), rt("e", "h:1")}, nil},
		{"both empty", nil, nil, nil},
		{"from nothing", nil, from, from},
		{"to nothing", from, nil, []*hostv1.Route{rt("a"), rt("b"), rt("c"), rt("e")}},
		{"adds", from, []*hostv1.Route{rt("0", "h:9"), rt("a", "h:1"), rt("b", "h:1"), rt("c", "h:1", "h:2"), rt("d", "h:3"), rt("e", "h:1"), rt("f", "h:4")},
			[]*hostv1.Route{rt("0", "h:9"), rt("d", "h:3"), rt("f", "h:4")}},
		{"changes", from, []*hostv1.Route{rt("a", "h:2"), rt("b", "h:1"), rt("c", "h:1"), rt("e", "h:1", "h:3")},
			[]*hostv1.Route{rt("a", "h:2"), rt("c", "h:1"), rt("e", "h:1", "h:3")}},
		{"removes", from, []*hostv1.Route{rt("b", "h:1"), rt("c", "h:1", "h:2")},
			[]*hostv1.Route{rt("a"), rt("e")}},
		{"all at once", from, []*hostv1.Route{rt("b", "h:2"), rt("d", "h:1"), rt("e", "h:1")},
			[]*hostv1.Route{rt("a"), rt("b", "h:2"), rt("c"), rt("d", "h:1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := routesDiff(tc.from, tc.to)
			assert.True(t, sameList(got, tc.want), "got %v, want %v", got, tc.want)
		})
	}
	assert.True(t, sortedRoutes(from))
	assert.False(t, sortedRoutes([]*hostv1.Route{rt("b"), rt("a")}))
	assert.False(t, sortedRoutes([]*hostv1.Route{rt("a"), rt("a")}))
}

// setRoutesCalls records the SetRoutes requests a client sends, and how
// the host answered each.
type setRoutesCalls struct {
	mu    sync.Mutex
	reqs  []*hostv1.SetRoutesRequest
	codes []codes.Code
}

func (s *setRoutesCalls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if r, ok := req.(*hostv1.SetRoutesRequest); ok {
		s.mu.Lock()
		s.reqs = append(s.reqs, proto.Clone(r).(*hostv1.SetRoutesRequest))
		s.codes = append(s.codes, status.Code(err))
		s.mu.Unlock()
	}
	return err
}

// take returns the calls since the last take.
func (s *setRoutesCalls) take() ([]*hostv1.SetRoutesRequest, []codes.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, c := s.reqs, s.codes
	s.reqs, s.codes = nil, nil
	return r, c
}

// TestPushRoutesDelta: the pusher gives a host whose table it knows only
// the routes that changed, over the generation it knows; when the host's
// table changed behind its back (another admin client set another one,
// or the host restarted), the host refuses the delta, and the push reads
// the table and gives it what differs from that, or all of it over an
// empty table. The book records the whole table every time.
func TestPushRoutesDelta(t *testing.T) {
	h := testbed.StartHost(t, "host-d")
	var calls setRoutesCalls
	cl, err := hostclient.New(h.Addr, hostclient.Options{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(calls.intercept)}})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	ctx := ctxT(t, time.Minute)
	info, err := cl.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.GetRouteDeltas(), "the host takes deltas")
	c := &conn{name: "host-d", address: h.Addr, client: cl, probe: probe{Done: true, Ready: true, Info: info}}
	book := &routeBook{}
	const resync = time.Minute
	// tbl is a table of routes and of modules that never change, so that
	// a delta is smaller than the table.
	tbl := func(version uint64, routes ...*hostv1.Route) table {
		for _, m := range []string{"p1", "p2", "p3", "p4", "p5", "p6"} {
			routes = append(routes, rt(m, "10.0.1.1:1"))
		}
		slices.SortFunc(routes, func(a, b *hostv1.Route) int { return strings.Compare(a.GetModule(), b.GetModule()) })
		return table{version: version, routes: routes}
	}

	hostHas := func(t *testing.T, want []*hostv1.Route) uint64 {
		t.Helper()
		got, err := cl.Routes(ctx)
		require.NoError(t, err)
		assert.True(t, sameList(got.GetRoutes(), want), "the host has %v, want %v", got.GetRoutes(), want)
		has, known := c.knownTables(resync)
		assert.True(t, known)
		assert.True(t, sameList(has.routes, want), "the conn knows %v", has.routes)
		assert.Equal(t, got.GetGeneration(), has.routesGen)
		book.mu.Lock()
		defer book.mu.Unlock()
		n := 0
		for _, r := range want {
			for _, a := range r.GetAddresses() {
				assert.True(t, book.hosts["host-d"].routes[replicaAt{r.GetModule(), a}], "the book has %s at %s", r.GetModule(), a)
				n++
			}
		}
		assert.Len(t, book.hosts["host-d"].routes, n, "the book has the whole table")
		return got.GetGeneration()
	}

	t1 := tbl(1, rt("a", "10.0.0.1:1"), rt("b", "10.0.0.2:1"), rt("c", "10.0.0.3:1"))
	require.NoError(t, pushTables(ctx, c, t1, resync, book))
	reqs, _ := calls.take()
	require.Len(t, reqs, 1)
	assert.False(t, reqs[0].GetDelta(), "a fresh host (generation 0) gets the whole table")
	gen1 := hostHas(t, t1.routes)

	t2 := tbl(2, rt("a", "10.0.0.1:1", "10.0.0.4:1"), rt("c", "10.0.0.3:1"), rt("d", "10.0.0.5:1"))
	require.NoError(t, pushTables(ctx, c, t2, resync, book))
	reqs, _ = calls.take()
	require.Len(t, reqs, 1, "known: no read, one push")
	assert.True(t, reqs[0].GetDelta())
	assert.Equal(t, gen1, reqs[0].GetBaseGeneration())
	assert.True(t, sameList(reqs[0].GetRoutes(), []*hostv1.Route{rt("a", "10.0.0.1:1", "10.0.0.4:1"), rt("b"), rt("d", "10.0.0.5:1")}), "%v", reqs[0].GetRoutes())
	gen2 := hostHas(t, t2.routes)

	t.Run("a table set behind its back", func(t *testing.T) {
		other := tbl(0, rt("a", "10.0.0.9:1"), rt("x", "10.0.0.8:1")).routes
		_, err := cl.SetRoutes(ctx, gen2+1, other)
		require.NoError(t, err)
		calls.take()
		t3 := tbl(3, rt("a", "10.0.0.1:1", "10.0.0.4:1"), rt("d", "10.0.0.5:1"), rt("e", "10.0.0.6:1"))
		require.NoError(t, pushTables(ctx, c, t3, resync, book))
		reqs, got := calls.take()
		require.Len(t, reqs, 2, "a refused delta, then one over the table read")
		assert.True(t, reqs[0].GetDelta())
		assert.Equal(t, gen2, reqs[0].GetBaseGeneration())
		assert.Equal(t, codes.FailedPrecondition, got[0])
		assert.True(t, reqs[1].GetDelta())
		assert.Equal(t, gen2+1, reqs[1].GetBaseGeneration())
		assert.Equal(t, codes.OK, got[1])
		assert.True(t, sameList(reqs[1].GetRoutes(), []*hostv1.Route{rt("a", "10.0.0.1:1", "10.0.0.4:1"), rt("d", "10.0.0.5:1"), rt("e", "10.0.0.6:1"), rt("x")}), "%v", reqs[1].GetRoutes())
		hostHas(t, t3.routes)
	})

	t.Run("a host emptied (restarted)", func(t *testing.T) {
		_, err := cl.SetRoutes(ctx, 0, nil)
		require.NoError(t, err)
		calls.take()
		t4 := tbl(4, rt("a", "10.0.0.1:1"), rt("f", "10.0.0.7:1"))
		require.NoError(t, pushTables(ctx, c, t4, resync, book))
		reqs, got := calls.take()
		require.Len(t, reqs, 2)
		assert.True(t, reqs[0].GetDelta())
		assert.Equal(t, codes.FailedPrecondition, got[0])
		assert.False(t, reqs[1].GetDelta(), "over a table of generation 0, the whole table")
		assert.Equal(t, codes.OK, got[1])
		hostHas(t, t4.routes)
	})

	t.Run("a host without deltas", func(t *testing.T) {
		c.probe.Info = proto.Clone(info).(*hostv1.InfoResponse)
		c.probe.Info.RouteDeltas = false
		t5 := tbl(5, rt("a", "10.0.0.1:1"), rt("f", "10.0.0.7:1"), rt("g", "10.0.0.8:1"))
		require.NoError(t, pushTables(ctx, c, t5, resync, book))
		reqs, _ := calls.take()
		require.Len(t, reqs, 1)
		assert.False(t, reqs[0].GetDelta(), "a host that does not say it takes deltas gets whole tables")
		hostHas(t, t5.routes)
	})
}

// TestPushRoutesChunked: a route table larger than a host's message limit
// (many modules, each on many hosts) reaches the host whole, in messages
// each below the operator's bound: the table as its first part, then
// deltas; and a change of most of it goes as deltas of that bound too.
func TestPushRoutesChunked(t *testing.T) {
	h := testbed.StartHost(t, "host-c")
	var calls setRoutesCalls
	cl, err := hostclient.New(h.Addr, hostclient.Options{MaxMessageBytes: 64 << 20,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(calls.intercept)}})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	ctx := ctxT(t, time.Minute)
	info, err := cl.Info(ctx)
	require.NoError(t, err)
	c := &conn{name: "host-c", address: h.Addr, client: cl, probe: probe{Done: true, Ready: true, Info: info}}
	book := &routeBook{}

	big := func(version uint64, port int) table {
		routes := make([]*hostv1.Route, 25000)
		for i := range routes {
			var addrs []string
			for j := range 10 {
				addrs = append(addrs, fmt.Sprintf("10.0.%d.%d:%d", j, i%250, port))
			}
			routes[i] = &hostv1.Route{Module: fmt.Sprintf("m%05d", i), Addresses: addrs}
		}
		return table{version: version, routes: routes, limit: DefaultMaxTableBytes}
	}
	for _, tt := range []struct {
		name string
		t    table
	}{
		{"a new host gets the table whole", big(1, 50051)},
		{"most of it changed", big(2, 50052)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Greater(t, routesSize(tt.t.routes), 4<<20+64<<10, "the table is past the host's message limit")
			require.NoError(t, pushTables(ctx, c, tt.t, time.Minute, book))
			reqs, codes := calls.take()
			require.Greater(t, len(reqs), 1)
			for i, r := range reqs {
				assert.LessOrEqual(t, proto.Size(r), DefaultMaxTableBytes+64, "message %d", i)
				assert.Equal(t, codes[i].String(), "OK", "message %d", i)
			}
			t.Logf("%d messages of at most %d bytes for %d bytes of routes", len(reqs), DefaultMaxTableBytes, routesSize(tt.t.routes))
			got, err := cl.Routes(ctx)
			require.NoError(t, err)
			assert.True(t, sameList(got.GetRoutes(), tt.t.routes), "the host has %d routes", len(got.GetRoutes()))
		})
	}
}
