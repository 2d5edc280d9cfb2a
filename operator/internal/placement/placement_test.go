package placement

import (
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

// host is a ready host with labels given as k=v pairs.
func host(name string, allocated int64, kv ...string) Host {
	h := Host{Name: name, Ready: true, Labels: map[string]string{}, ABIVersions: []int32{1}, Version: "0.1.0"}
	h.Allocated.Modules = allocated
	for i := 0; i+1 < len(kv); i += 2 {
		h.Labels[kv[i]] = kv[i+1]
	}
	return h
}

func notReadyHost(name string) Host { h := host(name, 0); h.Ready = false; return h }

func cordoned(h Host) Host { h.Unschedulable = true; return h }

func withCapacity(h Host, modules, memory int64) Host {
	h.Capacity = Resources{Modules: modules, Memory: memory}
	return h
}

func withHost(h Host, version string, abi ...int32) Host {
	h.Version, h.ABIVersions = version, abi
	return h
}

var image = Artifact{Image: "registry.local/hello:v1"}

func module(replicas int, current ...string) Module {
	return Module{Replicas: replicas, Artifact: image, Request: Resources{Modules: 1}, Current: current}
}

func selecting(m Module, selector string) Module {
	s, err := labels.Parse(selector)
	if err != nil {
		panic(err)
	}
	m.Selector = s
	return m
}

func mapped(m Module, mappings ...Mapping) Module { m.Mappings = mappings; return m }

func everyHost(m Module) Module { m.EveryHost = true; return m }

func avoiding(m Module, hosts ...string) Module { m.Avoid = hosts; return m }

var (
	v2     = Artifact{Image: "registry.local/hello:abi2"}
	legacy = Artifact{URL: "https://example.test/hello-legacy.wasm", SHA256: "ab"}
)

// placeTests are TestPlace's cases.
var placeTests = []struct {
	name     string
	module   Module
	hosts    []Host
	opts     Options
	want     []Assignment
	unplaced int
	reason   string // compared when set
}{
	{
		name:   "one host, one replica",
		module: module(1),
		hosts:  []Host{host("a", 0)},
		want:   []Assignment{{"a", image}},
		reason: "1/1 hosts available",
	},
	{
		name:     "no hosts",
		module:   module(1),
		unplaced: 1,
		reason:   "0/0 hosts available",
	},
	{
		name:     "every host filtered, each counted once by its first filter",
		module:   selecting(module(1), "tier=edge"),
		hosts:    []Host{notReadyHost("a"), notReadyHost("b"), host("c", 0, "tier", "core")},
		unplaced: 1,
		reason:   "0/3 hosts available: 2 not ready, 1 not selected by hostSelector",
	},
	{
		name:   "a host where the load failed gets no replica, even the current one",
		module: avoiding(module(1, "a"), "a"),
		hosts:  []Host{host("a", 0), host("b", 5)},
		want:   []Assignment{{"b", image}},
		reason: "1/2 hosts available: 1 where its load failed",
	},
	{
		name:   "a host running a module of the name of its own gets no replica, even the current one",
		module: func() Module { m := module(1, "a"); m.Taken = []string{"a"}; return m }(),
		hosts:  []Host{host("a", 0), host("b", 5)},
		want:   []Assignment{{"b", image}},
		reason: "1/2 hosts available: 1 running a module of that name of their own",
	},
	{
		name:     "load failed everywhere",
		module:   avoiding(module(2), "a", "b"),
		hosts:    []Host{host("a", 0), host("b", 0), notReadyHost("c")},
		unplaced: 2,
		reason:   "0/3 hosts available: 1 not ready, 2 where its load failed",
	},
	{
		name:   "least loaded first",
		module: module(2),
		hosts:  []Host{host("a", 3), host("b", 1), host("c", 2)},
		want:   []Assignment{{"b", image}, {"c", image}},
	},
	{
		name:   "ties broken by name",
		module: module(2),
		hosts:  []Host{host("c", 1), host("b", 1), host("a", 1)},
		want:   []Assignment{{"a", image}, {"b", image}},
	},
	{
		name:   "fewer modules breaks a tie of load on unlimited hosts",
		module: module(1),
		hosts:  []Host{host("a", 2), host("b", 1)},
		want:   []Assignment{{"b", image}},
	},
	{
		name:   "load is relative to capacity",
		module: module(1),
		// a: (5+1)/10 = 0.6 full after placing; b: (2+1)/4 = 0.75.
		hosts: []Host{withCapacity(host("a", 5), 10, 0), withCapacity(host("b", 2), 4, 0)},
		want:  []Assignment{{"a", image}},
	},
	{
		name:   "spread over zones before load",
		module: module(2),
		hosts: []Host{
			host("a", 0, DefaultSpreadLabel, "z1"),
			host("b", 1, DefaultSpreadLabel, "z1"),
			host("c", 9, DefaultSpreadLabel, "z2"),
		},
		want: []Assignment{{"a", image}, {"c", image}},
	},
	{
		name:   "spread label is configurable",
		module: module(2),
		opts:   Options{SpreadLabel: "rack"},
		hosts: []Host{
			host("a", 0, "rack", "r1", DefaultSpreadLabel, "z1"),
			host("b", 1, "rack", "r1", DefaultSpreadLabel, "z2"),
			host("c", 9, "rack", "r2", DefaultSpreadLabel, "z2"),
		},
		want: []Assignment{{"a", image}, {"c", image}},
	},
	{
		name:   "spread counts the replicas kept",
		module: module(2, "a"),
		hosts: []Host{
			host("a", 5, DefaultSpreadLabel, "z1"),
			host("b", 0, DefaultSpreadLabel, "z1"),
			host("c", 3, DefaultSpreadLabel, "z2"),
		},
		want: []Assignment{{"a", image}, {"c", image}},
	},
	{
		name:     "capacity: module slots and memory",
		module:   Module{Replicas: 3, Artifact: image, Request: Resources{Modules: 1, Memory: 64 << 20}},
		hosts:    []Host{withCapacity(host("a", 4), 4, 0), withCapacity(host("b", 0), 0, 32<<20), withCapacity(host("c", 0), 8, 1<<30)},
		want:     []Assignment{{"c", image}},
		unplaced: 2,
		reason:   "1/3 hosts available: 1 without a free module slot, 1 without enough memory",
	},
	{
		name:   "sticky: a placement stays on a healthy host though another is less loaded",
		module: module(1, "b"),
		hosts:  []Host{host("a", 0), host("b", 7)},
		want:   []Assignment{{"b", image}},
	},
	{
		name:   "sticky: a placement on a host that is not ready moves",
		module: module(1, "b"),
		hosts:  []Host{host("a", 3), notReadyHost("b"), host("c", 1)},
		want:   []Assignment{{"c", image}},
		reason: "2/3 hosts available: 1 not ready",
	},
	{
		name:   "sticky: a placement moves off a host the selector no longer selects",
		module: selecting(module(1, "a"), "tier=edge"),
		hosts:  []Host{host("a", 0, "tier", "core"), host("b", 5, "tier", "edge")},
		want:   []Assignment{{"b", image}},
	},
	{
		name:   "cordon: an unschedulable host keeps its placement when no other host can take it, and gets no new one",
		module: module(2, "a"),
		hosts:  []Host{cordoned(host("a", 0)), cordoned(host("b", 0)), host("c", 4)},
		want:   []Assignment{{"a", image}, {"c", image}},
		reason: "1/3 hosts available: 2 unschedulable",
	},
	{
		name:   "cordon: a placement moves off an unschedulable host another host can take it",
		module: module(2, "a", "b"),
		hosts:  []Host{cordoned(host("a", 0)), host("b", 1), host("c", 4)},
		want:   []Assignment{{"b", image}, {"c", image}},
		reason: "2/3 hosts available: 1 unschedulable",
	},
	{
		name:   "every host: each selected, ready, schedulable host, whatever Replicas says",
		module: everyHost(selecting(module(1, "a", "d"), "tier=edge")),
		hosts: []Host{host("a", 0, "tier", "edge"), host("b", 9, "tier", "edge"), host("c", 0, "tier", "core"),
			cordoned(host("d", 0, "tier", "edge")), notReadyHost("e"), cordoned(host("f", 0, "tier", "edge"))},
		want:   []Assignment{{"a", image}, {"b", image}},
		reason: "2/6 hosts available: 1 not ready, 2 unschedulable, 1 not selected by hostSelector",
	},
	{
		name:   "every host: a host that stops matching loses it, one that joins gets it",
		module: everyHost(selecting(module(0, "a", "b"), "tier=edge")),
		hosts:  []Host{host("a", 0, "tier", "core"), host("b", 0, "tier", "edge"), host("c", 0, "tier", "edge")},
		want:   []Assignment{{"b", image}, {"c", image}},
	},
	{
		name:   "every host: no room is not a failure to place",
		module: everyHost(module(0)),
		hosts:  []Host{withCapacity(host("a", 1), 1, 0), host("b", 0)},
		want:   []Assignment{{"b", image}},
		reason: "1/2 hosts available: 1 without a free module slot",
	},
	{
		name:   "sticky: a full host keeps the placement it counts already",
		module: module(1, "a"),
		hosts:  []Host{withCapacity(host("a", 2), 2, 0), host("b", 0)},
		want:   []Assignment{{"a", image}},
	},
	{
		name:   "scale down keeps the best placed",
		module: module(1, "a", "b", "c"),
		hosts:  []Host{host("a", 3), host("b", 1), host("c", 2)},
		want:   []Assignment{{"b", image}},
	},
	{
		name:   "scale up keeps what is placed and adds the best of the rest",
		module: module(3, "c"),
		hosts:  []Host{host("a", 2), host("b", 1), host("c", 9), host("d", 5)},
		want:   []Assignment{{"a", image}, {"b", image}, {"c", image}},
	},
	{
		name:   "zero replicas",
		module: module(0, "a"),
		hosts:  []Host{host("a", 0)},
	},
	{
		name:     "fewer hosts than replicas: place what fits",
		module:   module(3),
		hosts:    []Host{host("a", 0), host("b", 0)},
		want:     []Assignment{{"a", image}, {"b", image}},
		unplaced: 1,
		reason:   "2/2 hosts available",
	},
	{
		name: "mappings: first match wins, no artifact means the module's own, no match filters",
		module: mapped(module(3),
			Mapping{ABI: 2, Artifact: v2},
			Mapping{HostVersionRegexp: regexp.MustCompile(`^0\.0\.`), Artifact: legacy},
			Mapping{ABI: 1},
		),
		hosts: []Host{
			withHost(host("a", 0), "0.3.0", 1, 2),
			withHost(host("b", 0), "0.0.9", 1),
			withHost(host("c", 0), "0.3.0", 1),
			withHost(host("d", 0), "0.3.0", 3),
		},
		want:   []Assignment{{"a", v2}, {"b", legacy}, {"c", image}},
		reason: "3/4 hosts available: 1 with no matching host mapping",
	},
	{
		name:   "mapping criteria must all match",
		module: mapped(module(2), Mapping{ABI: 1, HostVersion: "0.3.0", Artifact: v2}),
		hosts: []Host{
			withHost(host("a", 0), "0.3.0", 1),
			withHost(host("b", 0), "0.3.0", 2),
			withHost(host("c", 0), "0.4.0", 1),
		},
		want:     []Assignment{{"a", v2}},
		unplaced: 1,
		reason:   "1/3 hosts available: 2 with no matching host mapping",
	},
	{
		name:   "a kept placement takes the artifact its mapping names now",
		module: mapped(module(1, "a"), Mapping{ABI: 1, Artifact: v2}),
		hosts:  []Host{host("a", 0)},
		want:   []Assignment{{"a", v2}},
	},
	{
		name:   "filters in order",
		module: selecting(mapped(module(1), Mapping{ABI: 9}), "tier=edge"),
		hosts: []Host{
			notReadyHost("a"),
			cordoned(host("b", 0, "tier", "edge")),
			host("c", 0),
			host("d", 0, "tier", "edge"),
			withHost(withCapacity(host("e", 1, "tier", "edge"), 1, 0), "0.1.0", 9),
		},
		unplaced: 1,
		reason:   "0/5 hosts available: 1 not ready, 1 unschedulable, 1 not selected by hostSelector, 1 with no matching host mapping, 1 without a free module slot",
	},
}

func TestPlace(t *testing.T) {
	for _, tt := range placeTests {
		t.Run(tt.name, func(t *testing.T) {
			got := Place(tt.module, tt.hosts, tt.opts)
			assert.Equal(t, tt.want, got.Assignments)
			assert.Equal(t, tt.unplaced, got.Unplaced)
			if tt.reason != "" {
				assert.Equal(t, tt.reason, got.Reason)
			}

			// Placing again from the decision, with the new replicas counted
			// on their hosts, moves nothing.
			again := tt.module
			again.Current = got.Hosts()
			hosts := append([]Host(nil), tt.hosts...)
			for i := range hosts {
				if slices.Contains(got.Hosts(), hosts[i].Name) && !slices.Contains(tt.module.Current, hosts[i].Name) {
					hosts[i].Allocated = hosts[i].Allocated.Add(tt.module.Request)
				}
			}
			assert.Equal(t, got.Assignments, Place(again, hosts, tt.opts).Assignments, "re-placing moved a replica")
		})
	}
}

// TestPlaceDeterministic: the order of the hosts does not change a decision.
func TestPlaceDeterministic(t *testing.T) {
	hosts := []Host{
		host("a", 1, DefaultSpreadLabel, "z1"), host("b", 1, DefaultSpreadLabel, "z2"),
		host("c", 1, DefaultSpreadLabel, "z1"), host("d", 0, DefaultSpreadLabel, "z3"),
		host("e", 1, DefaultSpreadLabel, "z2"), host("f", 1),
	}
	want := Place(module(4), hosts, Options{})
	require.Len(t, want.Assignments, 4)
	for i := range hosts {
		rotated := append(append([]Host(nil), hosts[i:]...), hosts[:i]...)
		assert.Equal(t, want, Place(module(4), rotated, Options{}), "rotation %d", i)
	}
}
