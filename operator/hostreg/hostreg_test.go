package hostreg_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/hostreg"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

// host is a hostreg.Host of plain values: what a daemon's host would
// report, set by the test.
type host struct {
	mu      sync.Mutex
	modules []hostreg.Module
	changes chan struct{}
	closed  bool
}

func newHost(mods ...hostreg.Module) *host {
	return &host{modules: mods, changes: make(chan struct{}, 1)}
}

func (h *host) Modules() []hostreg.Module {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.modules)
}

func (h *host) Changes(ctx context.Context) <-chan struct{} {
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.closed = true
		close(h.changes)
	})
	return h.changes
}

// set replaces the modules and signals the change.
func (h *host) set(mods ...hostreg.Module) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.modules = mods
	if h.closed {
		return
	}
	select {
	case h.changes <- struct{}{}:
	default:
	}
}

// TestRegistrar: in process, against a real apiserver. The registrar
// applies the TinyHost, renews its Lease, publishes the modules the host
// loaded on its own (not those loaded with the operator's label), follows
// a change of them at once (Resync is an hour), and Stop deletes what it
// created.
func TestRegistrar(t *testing.T) {
	env := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hosts"}}))

	h := newHost(hostreg.Module{Name: "own"},
		hostreg.Module{Name: "placed", Labels: map[string]string{v1alpha1.LabelModuleNamespace: "apps"}})
	r, err := hostreg.New(hostreg.Options{Config: env.Config, Name: "h1", Address: "127.0.0.1:50051",
		Labels: map[string]string{"zone": "a"}, Namespace: "hosts", Resync: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, "hosts", r.Namespace())
	r.Start(h)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = r.Stop(context.WithoutCancel(ctx))
		}
	})

	var th v1alpha1.TinyHost
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, c.Get(ctx, client.ObjectKey{Name: "h1"}, &th))
		assert.Equal(ct, "127.0.0.1:50051", th.Spec.Address)
		assert.Equal(ct, map[string]string{"zone": "a"}, th.Labels)
		assert.Equal(ct, map[string]string{"own": "h1"}, provided(ctx, ct, c))
	}, time.Minute, 50*time.Millisecond, "TinyHost applied, the host's own module published")
	var l coordinationv1.Lease
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, c.Get(ctx, client.ObjectKey{Namespace: "hosts", Name: "h1"}, &l))
		assert.Equal(ct, "h1", *l.Spec.HolderIdentity)
		require.Len(ct, l.OwnerReferences, 1)
		assert.Equal(ct, th.UID, l.OwnerReferences[0].UID)
	}, time.Minute, 50*time.Millisecond, "Lease owned by the TinyHost")

	h.set(hostreg.Module{Name: "new"})
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, map[string]string{"new": "h1"}, provided(ctx, ct, c))
	}, time.Minute, 50*time.Millisecond, "a change of the host's modules is published without waiting for a resync")

	stopped = true
	require.NoError(t, r.Stop(ctx))
	err = c.Get(ctx, client.ObjectKey{Name: "h1"}, &v1alpha1.TinyHost{})
	assert.True(t, apierrors.IsNotFound(err), "TinyHost h1: %v", err)
	err = c.Get(ctx, client.ObjectKey{Namespace: "hosts", Name: "h1"}, &coordinationv1.Lease{})
	assert.True(t, apierrors.IsNotFound(err), "Lease h1: %v", err)
	assert.Empty(t, provided(ctx, t, c))
}

// provided lists the TinyModules of namespace hosts with their
// spec.providedBy.
func provided(ctx context.Context, t require.TestingT, c client.Client) map[string]string {
	var list v1alpha1.TinyModuleList
	require.NoError(t, c.List(ctx, &list, client.InNamespace("hosts")))
	out := map[string]string{}
	for _, m := range list.Items {
		out[m.Name] = m.Spec.ProvidedBy
	}
	return out
}
