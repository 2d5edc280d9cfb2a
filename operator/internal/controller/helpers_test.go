package controller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/host/artifact"
	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/shard"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// bed is a control plane, a registry with hello and common, hosts
// registered as TinyHosts, and the operator.
type bed struct {
	tb    testing.TB // the test the bed lives as long as
	env   *kubetest.Env
	c     client.Client
	reg   *testbed.Registry
	hello testbed.Module
	comm  testbed.Module
	hosts map[string]*testbed.Host
	mgr   *testbed.Manager
	opts  Options
	bedOptions
}

type bedOptions struct {
	// fetch: the operator fetches artifacts and streams them (FetchLoader)
	// instead of the hosts fetching them (SourceLoader).
	fetch bool
	// hostOptions are the operator's options for host connections.
	hostOptions hostclient.Options
	// failureThreshold, when not 0, replaces the bed's 3 failed probes.
	failureThreshold int
	// shards, when set, runs one sharded manager per identity instead of
	// one that acts on everything.
	shards []string
	// loader, when set, wraps the operator's Loader.
	loader func(Loader) Loader
	// noAdmission: a control plane without the policy that sets the
	// TinyModule finalizer at creation.
	noAdmission bool
	// tracerProvider, when set, records the reconciles' spans.
	tracerProvider trace.TracerProvider
	// resync, when not 0, replaces the bed's 30s resync period.
	resync time.Duration
}

// hostSpec is a host to start: its name, labels and more daemon flags.
type hostSpec struct {
	name   string
	labels map[string]string
	args   []string
}

func newBed(t testing.TB, hosts ...hostSpec) *bed { return newBedWith(t, bedOptions{}, hosts...) }

func newBedWith(t testing.TB, o bedOptions, hosts ...hostSpec) *bed {
	t.Helper()
	b := &bed{tb: t, env: kubetest.StartWith(t, kubetest.Options{NoAdmission: o.noAdmission}), reg: testbed.StartRegistry(t), hosts: map[string]*testbed.Host{}, bedOptions: o}
	b.c = b.env.Client
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); b.hello = b.reg.Push(t, testbed.Hello, "tinyhost/hello:0.1.0") }()
	go func() { defer wg.Done(); b.comm = b.reg.Push(t, testbed.Common, "tinyhost/common:0.1.0") }()
	started := make([]*testbed.Host, len(hosts))
	for i, h := range hosts {
		wg.Add(1)
		args := append([]string{"--artifacts-plain-http", b.reg.Host}, h.args...)
		go func() { defer wg.Done(); started[i] = testbed.StartHost(t, h.name, args...) }()
	}
	wg.Wait()
	for i, h := range hosts {
		b.hosts[h.name] = started[i]
		testbed.Register(t, b.c, h.name, started[i].Addr, h.labels)
	}
	b.start(t)
	return b
}

// start starts (or restarts) the operator.
func (b *bed) start(t testing.TB) {
	t.Helper()
	var loader Loader = SourceLoader{}
	if b.fetch {
		o := b.reg.ClientOptions()
		o.CacheDir = t.TempDir()
		ac, err := artifact.New(o)
		require.NoError(t, err)
		loader = FetchLoader{Client: ac}
	}
	if b.bedOptions.loader != nil {
		loader = b.bedOptions.loader(loader)
	}
	b.opts = Options{
		ProbeInterval: time.Second, ProbeTimeout: time.Second, FailureThreshold: 3,
		Resync: 30 * time.Second, Loader: loader, Host: b.hostOptions, LeaseNamespace: "default",
		TracerProvider: b.tracerProvider,
	}
	if b.failureThreshold != 0 {
		b.opts.FailureThreshold = b.failureThreshold
	}
	if b.resync != 0 {
		b.opts.Resync = b.resync
	}
	if len(b.shards) == 0 {
		b.mgr = testbed.StartManager(t, b.env, func(mgr ctrl.Manager) error { return Setup(mgr, b.opts) })
		return
	}
	for _, id := range b.shards {
		o := b.opts
		o.Shards = &shard.Options{Identity: id, Namespace: "default",
			LeaseDuration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: 500 * time.Millisecond}
		mgr := testbed.StartManager(t, b.env, func(mgr ctrl.Manager) error { return Setup(mgr, o) })
		if b.mgr == nil {
			b.mgr = mgr
		}
	}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually is testify's EventuallyWithT for a cond that says why it does
// not hold yet: it polls cond every 100ms until it returns nil, for at most
// d, fails with cond's last error, and returns how long it waited.
func eventually(t testing.TB, d time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, cond()) }, d, 100*time.Millisecond, what)
	return time.Since(start)
}

func (b *bed) module(t testing.TB, ns, name string) *v1alpha1.TinyModule {
	t.Helper()
	var m v1alpha1.TinyModule
	require.NoError(t, b.c.Get(pollCtx(t), client.ObjectKey{Namespace: ns, Name: name}, &m))
	return &m
}

func (b *bed) host(t testing.TB, name string) *v1alpha1.TinyHost {
	t.Helper()
	var h v1alpha1.TinyHost
	require.NoError(t, b.c.Get(pollCtx(t), client.ObjectKey{Name: name}, &h))
	return &h
}

// pollCtx is the context of a read in a condition that testify's
// Eventually or Never polls: such a read may still run when the wait is
// over (they return at their deadline, not after the call in flight), and
// the end of the test must not cancel it into a failure.
func pollCtx(t testing.TB) context.Context { return context.WithoutCancel(t.Context()) }

func (b *bed) create(t testing.TB, m *v1alpha1.TinyModule) {
	t.Helper()
	if m.Namespace == "" {
		m.Namespace = "default"
	}
	require.NoError(t, b.c.Create(t.Context(), m))
}

// update applies change to the module, retrying on conflicts.
func (b *bed) update(t testing.TB, ns, name string, change func(m *v1alpha1.TinyModule)) {
	t.Helper()
	eventually(t, 10*time.Second, "an update of "+name, func() error {
		var m v1alpha1.TinyModule
		if err := b.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &m); err != nil {
			return err
		}
		change(&m)
		return b.c.Update(t.Context(), &m)
	})
}

// remove deletes the module and waits until it is gone: unloaded from
// every ready host.
func (b *bed) remove(t testing.TB, ns, name string) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, client.IgnoreNotFound(b.c.Delete(ctx, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})))
	eventually(t, time.Minute, ns+"/"+name+" gone", func() error {
		err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1alpha1.TinyModule{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// updateHost applies change to the TinyHost, retrying on conflicts.
func (b *bed) updateHost(t testing.TB, name string, change func(h *v1alpha1.TinyHost)) {
	t.Helper()
	eventually(t, 10*time.Second, "an update of "+name, func() error {
		var h v1alpha1.TinyHost
		if err := b.c.Get(t.Context(), client.ObjectKey{Name: name}, &h); err != nil {
			return err
		}
		change(&h)
		return b.c.Update(t.Context(), &h)
	})
}

func namespace(t testing.TB, c client.Client, name string) {
	t.Helper()
	require.NoError(t, client.IgnoreAlreadyExists(c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})))
}

// ready waits for the module's Ready condition and returns the module.
func (b *bed) ready(t testing.TB, ns, name string, d time.Duration) *v1alpha1.TinyModule {
	t.Helper()
	var m *v1alpha1.TinyModule
	eventually(t, d, ns+"/"+name+" to be Ready", func() error {
		m = b.module(t, ns, name)
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != m.Generation {
			return fmt.Errorf("status %s", brief(m))
		}
		return nil
	})
	return m
}

// brief sums up a module's status for failure messages.
func brief(m *v1alpha1.TinyModule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s ready=%d/%d", m.Status.State, m.Status.ReadyReplicas, m.Status.Replicas)
	for _, p := range m.Status.Placements {
		fmt.Fprintf(&b, " [%s %s %s]", p.Host, p.Phase, p.Message)
	}
	for _, c := range m.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// readyOn is the hosts of the module's Ready placements.
func readyOn(m *v1alpha1.TinyModule) []string {
	var hs []string
	for _, p := range m.Status.Placements {
		if p.Phase == v1alpha1.PhaseReady {
			hs = append(hs, p.Host)
		}
	}
	return hs
}

// readyAddr is the address of the module's first Ready placement: where a
// test outside the cluster calls it (status.address names its Service).
func readyAddr(m *v1alpha1.TinyModule) string {
	for _, p := range m.Status.Placements {
		if p.Phase == v1alpha1.PhaseReady {
			return p.Address
		}
	}
	return ""
}

// loadedOn returns the names of the hosts that have the module loaded, per
// ListModules, and its digest on each.
func (b *bed) loadedOn(t testing.TB, module string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, h := range b.hosts {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		mods, err := h.Loaded(ctx)
		cancel()
		if err != nil {
			continue // a stopped host
		}
		if d, ok := mods[module]; ok {
			out[name] = d
		}
	}
	return out
}

// events returns the notes of the Events about the object with reason.
func (b *bed) events(t testing.TB, ns, name, reason string) []string {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, b.c.List(t.Context(), &list, client.InNamespace(ns)))
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// invoke calls hello/greeter-like ports on the host at addr.
func invoke(ctx context.Context, t testing.TB, addr, module, component, payload string) (string, error) {
	resp, err := testbed.Dial(t, addr).Invoke(ctx, &hostv1.InvokeRequest{Module: module, Component: component, Port: "in", Payload: []byte(payload)})
	if err != nil {
		return "", err
	}
	return string(resp.GetPayload()), nil
}

func replicas(n int32) *int32 { return &n }
