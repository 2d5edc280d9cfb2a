package controller

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// TestRegisteredHosts: hosts that register themselves (tinyhost --register)
// under the operator. A module a host loads from its directory is a
// TinyModule provided by it: Ready with its components, given a Service and
// an EndpointSlice, routed from the other host, and gone with its file. A
// module of a name the operator places is left loaded, and both sides are
// told. A host whose Lease is not renewed (SIGSTOP) is NotReady within 3 s,
// and Ready again once it renews.
func TestRegisteredHosts(t *testing.T) {
	b := newBed(t)
	ip := e2e.LocalIP(t)
	start := func(name string, extra ...string) *testbed.Host {
		args := append([]string{"--register", "--kubeconfig", b.env.Kubeconfig, "--namespace", "default",
			"--listen", ip + ":0", "--artifacts-plain-http", b.reg.Host}, extra...)
		h := testbed.StartHost(t, name, args...)
		b.hosts[name] = h
		return h
	}
	h1 := start("h1", "--label", "role=placed")
	// h2's Lease lasts 2 s, renewed twice a second: NotReady within 3 s of
	// its last renewal, whenever it stops.
	h2 := start("h2", "--lease-duration=2s", "--lease-renew-interval=500ms")
	for _, name := range []string{"h1", "h2"} {
		eventually(t, time.Minute, name+" registered and Ready", func() error {
			var h v1alpha1.TinyHost
			if err := b.c.Get(t.Context(), client.ObjectKey{Name: name}, &h); err != nil {
				return err
			}
			if !hostReady(&h) {
				return fmt.Errorf("not ready: %v", h.Status.Conditions)
			}
			return nil
		})
	}

	t.Run("a module from the directory: a TinyModule, a Service, routed", func(t *testing.T) { registeredOwnModule(t, b, h1, h2) })
	t.Run("a name the operator places: neither side unloaded, both told", func(t *testing.T) { registeredClash(t, b, h1, h2) })
	t.Run("the file deleted: its TinyModule goes", func(t *testing.T) { registeredFileDeleted(t, b, h1, h2) })
	t.Run("SIGSTOP: NotReady by the Lease, Ready again on SIGCONT", func(t *testing.T) { registeredLeaseExpires(t, b, h1, h2) })
}

func registeredOwnModule(t *testing.T, b *bed, h1, h2 *testbed.Host) {
	e2e.CopyFile(t, e2e.Wasm(t, testbed.Hello), filepath.Join(h1.ModulesDir, "hello.wasm"))
	b.appears(t, "default", "hello", time.Minute)
	m := b.ready(t, "default", "hello", time.Minute)
	assert.Equal(t, "h1", m.Spec.ProvidedBy)
	assert.Equal(t, "hello.default.svc:50051", m.Status.Address)
	assert.Equal(t, b.hello.Descriptor.Version, m.Status.Version)
	require.Len(t, m.Status.Components, 1)
	assert.Equal(t, "greeter", m.Status.Components[0].Name)
	require.Len(t, m.Status.Placements, 1)
	p := m.Status.Placements[0]
	assert.Equal(t, []string{"h1", h1.Addr, string(v1alpha1.PhaseReady)}, []string{p.Host, p.Address, string(p.Phase)})
	assert.Equal(t, []v1alpha1.InventoryItem{{Host: "h1", Digest: p.Digest, Phase: v1alpha1.PhaseReady}}, m.Status.Inventory)
	assert.Equal(t, m.Generation, m.Status.AppliedGeneration)
	assert.NotNil(t, m.Status.LastAppliedAt)
	assert.NotNil(t, m.Status.LastObservedAt)
	assert.Empty(t, m.Finalizers, "nothing for the operator to unload")

	checkService(t, b, m, map[string]string{"h1": h1.Addr})

	// hostcalls on h2 calls hello on h1 by name, through the routes
	// the operator pushed.
	e2e.LoadModule(t, e2e.Client(t, h2.Addr), "hostcalls", writeTemp(t, e2e.Guest(t, "hostcalls")), api.Limits{})
	eventually(t, 30*time.Second, "a call from h2 to hello on h1", func() error {
		resp, err := h2.Client.Invoke(t.Context(), &hostv1.InvokeRequest{Module: "hostcalls", Component: "caller", Port: "call",
			Payload: []byte(`hello/greeter/in {"name":"Ada"}`)})
		if err != nil {
			return err
		}
		if string(resp.GetPayload()) != `{"greeting":"Hello, Ada!"}` {
			return fmt.Errorf("answer %s", resp.GetPayload())
		}
		return nil
	})
	b.appears(t, "default", "hostcalls", 30*time.Second)
	assert.Equal(t, "h2", b.ready(t, "default", "hostcalls", 30*time.Second).Spec.ProvidedBy, "a load not the operator's is published too")
}

func registeredClash(t *testing.T, b *bed, h1, h2 *testbed.Host) {
	namespace(t, b.c, "apps")
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "greeter"},
		Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "placed"}}}})
	b.ready(t, "apps", "greeter", time.Minute)
	e2e.LoadModule(t, e2e.Client(t, h2.Addr), "greeter", writeTemp(t, e2e.WasmBytes(t, testbed.Hello)), api.Limits{})

	eventually(t, 30*time.Second, "apps/greeter Degraded by the clash", func() error {
		c := meta.FindStatusCondition(b.module(t, "apps", "greeter").Status.Conditions, v1alpha1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonNameConflict {
			return fmt.Errorf("Degraded: %+v", c)
		}
		return nil
	})
	eventually(t, 30*time.Second, "the Events of the clash", func() error {
		if len(b.events(t, "apps", "greeter", v1alpha1.ReasonNameConflict)) == 0 || len(b.events(t, "default", "h2", v1alpha1.ReasonNameConflict)) == 0 {
			return fmt.Errorf("no NameConflict Event on apps/greeter or on TinyHost h2 yet")
		}
		return nil
	})
	// h2 published its greeter in its namespace, after apps/greeter:
	// that one is refused by name.
	b.appears(t, "default", "greeter", 30*time.Second)
	own := b.module(t, "default", "greeter")
	assert.Equal(t, "h2", own.Spec.ProvidedBy)
	assert.Equal(t, metav1.ConditionFalse, meta.FindStatusCondition(own.Status.Conditions, v1alpha1.ConditionScheduled).Status)
	require.Never(t, func() bool {
		_, onH2 := b.loadedOn(t, "greeter")["h2"]
		_, onH1 := b.loadedOn(t, "greeter")["h1"]
		return !onH1 || !onH2
	}, 3*time.Second, 200*time.Millisecond, "greeter unloaded from a host")
	assert.Equal(t, []string{"h1"}, readyOn(b.module(t, "apps", "greeter")))
}

func registeredFileDeleted(t *testing.T, b *bed, h1, h2 *testbed.Host) {
	require.NoError(t, os.Remove(filepath.Join(h1.ModulesDir, "hello.wasm")))
	eventually(t, 30*time.Second, "TinyModule hello gone", func() error {
		err := b.c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "hello"}, &v1alpha1.TinyModule{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

func registeredLeaseExpires(t *testing.T, b *bed, h1, h2 *testbed.Host) {
	h2.Signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	continued := false
	t.Cleanup(func() {
		if !continued {
			h2.Signal(t, syscall.SIGCONT)
		}
	})
	var reason string
	eventually(t, 30*time.Second, "h2 NotReady", func() error {
		c := meta.FindStatusCondition(b.host(t, "h2").Status.Conditions, v1alpha1.ConditionHostReady)
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Ready: %+v", c)
		}
		reason = c.Reason
		return nil
	})
	t.Logf("h2 NotReady (%s) %v after SIGSTOP", reason, time.Since(stopped).Round(10*time.Millisecond))
	assert.Equal(t, reasonLeaseExpired, reason)

	h2.Signal(t, syscall.SIGCONT)
	continued = true
	eventually(t, 10*time.Second, "h2 Ready again", func() error {
		if !hostReady(b.host(t, "h2")) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
}

// appears waits until the TinyModule exists.
func (b *bed) appears(t *testing.T, ns, name string, d time.Duration) {
	t.Helper()
	eventually(t, d, "TinyModule "+ns+"/"+name, func() error {
		return b.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &v1alpha1.TinyModule{})
	})
}

// checkService: the module's Service is headless, has no selector and port 50051, and
// its EndpointSlices list the addresses of the hosts, each with the port
// the host listens on; all controlled by the TinyModule.
func checkService(t *testing.T, b *bed, m *v1alpha1.TinyModule, hosts map[string]string) {
	t.Helper()
	var svc corev1.Service
	eventually(t, 30*time.Second, "Service "+m.Name, func() error {
		return b.c.Get(t.Context(), client.ObjectKeyFromObject(m), &svc)
	})
	assert.Empty(t, svc.Spec.Selector)
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "headless: no ClusterIP to allocate, clients balance per call")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(50051), svc.Spec.Ports[0].Port)
	assert.True(t, metav1.IsControlledBy(&svc, m), "the Service goes with the TinyModule")

	want := map[string]string{}
	for host, addr := range hosts {
		want[host] = addr
	}
	eventually(t, 30*time.Second, "the EndpointSlices of "+m.Name, func() error {
		var list discoveryv1.EndpointSliceList
		if err := b.c.List(t.Context(), &list, client.InNamespace(m.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: m.Name}); err != nil {
			return err
		}
		got := map[string]string{}
		for _, s := range list.Items {
			if !metav1.IsControlledBy(&s, m) {
				return fmt.Errorf("EndpointSlice %s is not the TinyModule's", s.Name)
			}
			for _, e := range s.Endpoints {
				got[e.TargetRef.Name] = net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(*s.Ports[0].Port)))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("endpoints %v, want %v", got, want)
		}
		return nil
	})
}

func writeTemp(t *testing.T, wasm []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.wasm")
	require.NoError(t, os.WriteFile(p, wasm, 0o644))
	return p
}
