package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// heldLoader holds the load of one module until release is closed.
type heldLoader struct {
	Loader
	module  string
	started chan struct{} // closed when the held load begins
	release chan struct{}
	once    sync.Once
}

func (l *heldLoader) Load(ctx context.Context, host *hostclient.Client, req LoadRequest) (*hostv1.Module, error) {
	if req.Module.Name == l.module {
		l.once.Do(func() { close(l.started) })
		select {
		case <-l.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return l.Loader.Load(ctx, host, req)
}

// TestRounds: a module placed on a host while the host sync loads another
// there is loaded in the same convergence, and the status write that
// records the first load already lists it (Loading): one TinyHost write
// per round of loads, not two per load. Every version of the TinyHost
// that says "first" is Ready also lists "second".
func TestRounds(t *testing.T) {
	held := &heldLoader{module: "first", started: make(chan struct{}), release: make(chan struct{})}
	b := newBedWith(t, bedOptions{loader: func(l Loader) Loader { held.Loader = l; return held }}, hostSpec{name: "host-a"})

	ctx := ctxT(t, 2*time.Minute)
	wc, err := client.NewWithWatch(b.env.Config, client.Options{Scheme: b.c.Scheme()})
	require.NoError(t, err)
	w, err := wc.Watch(ctx, &v1alpha1.TinyHostList{})
	require.NoError(t, err)
	defer w.Stop()

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "first"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
	select {
	case <-held.started:
	case <-ctx.Done():
		t.Fatal("the load of first never began")
	}
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "second"}, Spec: v1alpha1.TinyModuleSpec{Image: b.comm.Ref}})
	// Released once the operator's cache has second placed on host-a,
	// so that the round after first's finds it.
	eventually(t, time.Minute, "second placed on host-a in the operator's cache", func() error {
		var m v1alpha1.TinyModule
		if err := b.mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: "default", Name: "second"}, &m); err != nil {
			return err
		}
		if !placedOn(&m, "host-a") {
			return fmt.Errorf("placements %v", m.Status.Placements)
		}
		return nil
	})
	close(held.release)
	b.ready(t, "default", "first", time.Minute)
	b.ready(t, "default", "second", time.Minute)

	var versions, firstReady int
	for {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-time.After(2 * time.Second):
		}
		if ev.Object == nil {
			break // nothing more for 2 s
		}
		h, ok := ev.Object.(*v1alpha1.TinyHost)
		if !ok || h.Name != "host-a" {
			continue
		}
		versions++
		phases := map[string]v1alpha1.Phase{}
		for _, e := range h.Status.Modules {
			phases[e.Name] = e.Phase
		}
		if phases["first"] == v1alpha1.PhaseReady {
			firstReady++
			assert.Contains(t, phases, "second", "TinyHost version %s: first Ready, second not listed: %v", h.ResourceVersion, phases)
		}
	}
	assert.Positive(t, firstReady, "no TinyHost version had first Ready (%d versions)", versions)
}

// TestLoadProgress: a load that runs past progressAfter is listed Loading
// in the TinyHost's status while it runs, then Ready; the status is not
// written before the load begins.
func TestLoadProgress(t *testing.T) {
	held := &heldLoader{module: "slow", started: make(chan struct{}), release: make(chan struct{})}
	b := newBedWith(t, bedOptions{loader: func(l Loader) Loader { held.Loader = l; return held }}, hostSpec{name: "host-a"})
	ctx := ctxT(t, 2*time.Minute)

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
	select {
	case <-held.started:
	case <-ctx.Done():
		t.Fatal("the load of slow never began")
	}
	entry := func() (v1alpha1.HostModule, bool) {
		var h v1alpha1.TinyHost
		require.NoError(t, b.c.Get(ctx, client.ObjectKey{Name: "host-a"}, &h))
		for _, e := range h.Status.Modules {
			if e.Name == "slow" {
				return e, true
			}
		}
		return v1alpha1.HostModule{}, false
	}
	// Not written before the load: listed only once it ran progressAfter.
	_, listed := entry()
	assert.False(t, listed, "slow listed as its load begins")
	eventually(t, time.Minute, "slow listed Loading while its load is held", func() error {
		e, ok := entry()
		if !ok || e.Phase != v1alpha1.PhaseLoading {
			return fmt.Errorf("entry %v (listed %t)", e, ok)
		}
		return nil
	})
	close(held.release)
	b.ready(t, "default", "slow", time.Minute)
	e, ok := entry()
	require.True(t, ok)
	assert.Equal(t, v1alpha1.PhaseReady, e.Phase)
	assert.Equal(t, "default", e.Namespace)
}
