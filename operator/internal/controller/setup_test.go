package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

// TestModuleEventsRequeue: a TinyModule event brings back only the hosts it
// concerns: none for a change of its conditions or version, the hosts it
// was and is placed on when its placements change as a host acts on them
// (not when one goes Ready); a change of its Ready addresses (the route
// table) goes to the pusher, not to every host.
func TestModuleEventsRequeue(t *testing.T) {
	env := kubetest.Start(t)
	for _, name := range []string{"h1", "h2", "h3"} {
		require.NoError(t, env.Client.Create(t.Context(), &v1alpha1.TinyHost{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TinyHostSpec{Address: "127.0.0.1:1"}}))
	}
	tabs := &tables{}
	sync := &hostSync{Client: env.Client, hosts: newHosts(Options{}), tables: tabs, pusher: newPusher(nil, tabs, env.Client, time.Minute, nil, unsharded{})}
	h := sync.moduleHandler()

	module, on := eventModule, eventPlacement
	tests := []struct {
		name     string
		old, new *v1alpha1.TinyModule
		now      []string // brought back
		tables   bool     // the tables changed
	}{
		{
			name: "conditions and version only",
			old:  module(1, v1alpha1.StatePending, on("h1", v1alpha1.PhaseLoading)),
			new:  module(1, v1alpha1.StateProgressing, on("h1", v1alpha1.PhaseLoading)),
		},
		{
			name: "a new placement",
			old:  module(1, v1alpha1.StatePending),
			new:  module(1, v1alpha1.StatePending, on("h1", v1alpha1.PhasePending)),
			now:  []string{"h1"},
		},
		{
			name: "a move",
			old:  module(1, v1alpha1.StatePending, on("h1", v1alpha1.PhaseLoading)),
			new:  module(1, v1alpha1.StatePending, on("h2", v1alpha1.PhasePending)),
			now:  []string{"h1", "h2"},
		},
		{
			name: "a spec change",
			old:  module(1, v1alpha1.StatePending, on("h1", v1alpha1.PhaseLoading)),
			new:  module(2, v1alpha1.StatePending, on("h1", v1alpha1.PhaseLoading)),
			now:  []string{"h1"},
		},
		{
			name:   "Ready: the route table changed, the host has nothing to do",
			old:    module(1, v1alpha1.StateProgressing, on("h1", v1alpha1.PhaseLoading)),
			new:    module(1, v1alpha1.StateReady, on("h1", v1alpha1.PhaseReady)),
			tables: true,
		},
		{
			name: "Draining: the host keeps it, routed",
			old:  module(1, v1alpha1.StateReady, on("h1", v1alpha1.PhaseReady)),
			new:  module(1, v1alpha1.StateProgressing, on("h1", v1alpha1.PhaseDraining)),
			now:  []string{"h1"},
		},
		{
			name:   "Unloading: the host unloads it, out of the routes",
			old:    module(1, v1alpha1.StateProgressing, on("h1", v1alpha1.PhaseDraining)),
			new:    module(1, v1alpha1.StateProgressing, on("h1", v1alpha1.PhaseUnloading)),
			now:    []string{"h1"},
			tables: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			t.Cleanup(q.ShutDown)
			before := sync.tables.want.Load()
			h.Update(t.Context(), event.TypedUpdateEvent[client.Object]{ObjectOld: tt.old, ObjectNew: tt.new}, q)
			assert.ElementsMatch(t, tt.now, drain(q), "brought back")
			require.Never(t, func() bool { return q.Len() > 0 }, 2*routesDelay, 50*time.Millisecond, "nothing brought back later")
			if tt.tables {
				assert.Greater(t, sync.tables.want.Load(), before, "the tables are built again")
				assert.Len(t, sync.pusher.kick, 1, "the pusher is told")
				<-sync.pusher.kick
			} else {
				assert.Equal(t, before, sync.tables.want.Load(), "the tables are as they were")
				assert.Empty(t, sync.pusher.kick, "the pusher is not told")
			}
		})
	}
}

// eventModule is the TinyModule m of TestModuleEventsRequeue.
func eventModule(gen int64, state v1alpha1.ModuleState, ps ...v1alpha1.Placement) *v1alpha1.TinyModule {
	return &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default", Generation: gen},
		Status:     v1alpha1.TinyModuleStatus{State: state, Version: string(state), Placements: ps},
	}
}

// eventPlacement is a placement on host, routed when Ready or Draining.
func eventPlacement(host string, phase v1alpha1.Phase) v1alpha1.Placement {
	p := v1alpha1.Placement{Host: host, Phase: phase, Artifact: "r/m:1"}
	if phase == v1alpha1.PhaseReady || phase == v1alpha1.PhaseDraining {
		p.Address = host + ":50051"
	}
	return p
}

// drain takes what the queue holds now, sorted.
func drain(q workqueue.TypedRateLimitingInterface[reconcile.Request]) []string {
	var out []string
	for q.Len() > 0 {
		r, _ := q.Get()
		q.Done(r)
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}

// TestHostEventsRequeue: a TinyHost event brings back only the modules it
// concerns: none for its probe time, the module of an entry that changed
// (the TinyModules of its name, for a module the host runs on its own),
// and, when it stops being Ready, every module on it, those the ledger
// placed there a moment ago, and those not fully placed.
func TestHostEventsRequeue(t *testing.T) {
	env := kubetest.Start(t)
	for _, name := range []string{"x", "u"} {
		require.NoError(t, env.Client.Create(t.Context(), &v1alpha1.TinyModule{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1alpha1.TinyModuleSpec{Image: "r/" + name + ":1"}}))
	}
	mods := &modules{Client: env.Client, ledger: newLedger()}
	mods.ledger.set(types.NamespacedName{Namespace: "default", Name: "l1"}, assumed{Hosts: []string{"h1"}})
	h := mods.hostHandler()

	host := func(ready bool, probed int64, entries ...v1alpha1.HostModule) *v1alpha1.TinyHost {
		th := &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "h1", Generation: 1}}
		setHostReady(&th.Status, 1, ready, reasonProbed, "")
		at := metav1.Unix(probed, 0)
		th.Status.LastProbeTime = &at
		th.Status.Modules = entries
		return th
	}
	entry := func(ns, name string, phase v1alpha1.Phase) v1alpha1.HostModule {
		return v1alpha1.HostModule{Namespace: ns, Name: name, Phase: phase}
	}
	tests := []struct {
		name     string
		old, new *v1alpha1.TinyHost
		want     []string
	}{
		{
			name: "probe time only",
			old:  host(true, 1, entry("default", "m1", v1alpha1.PhaseLoading)),
			new:  host(true, 2, entry("default", "m1", v1alpha1.PhaseLoading)),
		},
		{
			name: "an entry's phase",
			old:  host(true, 1, entry("default", "m1", v1alpha1.PhaseLoading), entry("default", "m2", v1alpha1.PhaseReady)),
			new:  host(true, 1, entry("default", "m1", v1alpha1.PhaseReady), entry("default", "m2", v1alpha1.PhaseReady)),
			want: []string{"m1"},
		},
		{
			name: "a module of the host's own",
			old:  host(true, 1),
			new:  host(true, 1, entry("", "x", v1alpha1.PhaseUnmanaged)),
			want: []string{"x"},
		},
		{
			name: "NotReady",
			old:  host(true, 1, entry("default", "m1", v1alpha1.PhaseReady)),
			new:  host(false, 1, entry("default", "m1", v1alpha1.PhaseReady)),
			want: []string{"l1", "m1", "u", "x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			t.Cleanup(q.ShutDown)
			h.Update(t.Context(), event.TypedUpdateEvent[client.Object]{ObjectOld: tt.old, ObjectNew: tt.new}, q)
			assert.Equal(t, tt.want, drain(q))
		})
	}
}
