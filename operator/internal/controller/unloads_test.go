package controller

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// stallServer answers no UnloadModule: each waits until its caller gives
// up, and is counted.
type stallServer struct {
	hostv1.UnimplementedHostServiceServer
	unloads atomic.Int32
}

func (s *stallServer) UnloadModule(ctx context.Context, _ *hostv1.UnloadModuleRequest) (*hostv1.UnloadModuleResponse, error) {
	s.unloads.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestUnloadsShareTheirTime: a host that lists many modules labelled as
// the operator's, none placed there, and stalls every unload, holds the
// convergence for one unload's time, not one per module: the worker goes
// back to the other hosts, the rest are left for the next convergence,
// their entries say so, and apply reports them for a retry. A drain of
// such a host gives up as soon.
func TestUnloadsShareTheirTime(t *testing.T) {
	srv := &stallServer{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	hostv1.RegisterHostServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cl, err := hostclient.New(lis.Addr().String(), hostclient.Options{})
	require.NoError(t, err)
	hs := newHosts(Options{})
	done := make(chan struct{})
	close(done)
	c := &conn{name: "evil", client: cl, probe: probe{Done: true, Ready: true}, stop: func() {}, done: done}
	hs.conns["evil"] = c
	r := &hostSync{hosts: hs, descs: newDescriptors(0), unloadBudget: 100 * time.Millisecond}

	const n = 5
	plan := hostPlan{entries: map[string]*v1alpha1.HostModule{}, loaded: map[string]*hostv1.Module{}}
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		plan.entries[name] = &v1alpha1.HostModule{Name: name, Namespace: "victim", Phase: v1alpha1.PhaseUnloading}
		plan.loaded[name] = &hostv1.Module{Name: name, Labels: map[string]string{v1alpha1.LabelModuleNamespace: "victim"}}
		plan.unloads = append(plan.unloads, name)
	}
	// The connection is made before the budget runs, so that the first
	// unload reaches the host however slow the machine.
	_, err = cl.RPC().Info(t.Context(), &hostv1.InfoRequest{})
	require.Error(t, err, "unimplemented")
	errs := r.apply(t.Context(), c, &plan)
	// The first unload stalled for the budget (a busy machine may give up
	// before the host sees it); no other was asked.
	assert.LessOrEqual(t, srv.unloads.Load(), int32(1))
	assert.Len(t, plan.entries, n, "nothing unloaded")
	for i := 1; i < n; i++ {
		assert.Contains(t, plan.entries[fmt.Sprintf("m%d", i)].Message, "retrying")
	}
	require.NotEmpty(t, errs)
	assert.Contains(t, errs[len(errs)-1].Error(), fmt.Sprintf("%d unloads left", n-1))

	r.Client = updated{}
	h := &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "evil", Finalizers: []string{HostFinalizer}, DeletionTimestamp: ptr(metav1.Now())}}
	for name := range plan.entries {
		h.Status.Modules = append(h.Status.Modules, v1alpha1.HostModule{Name: name, Namespace: "victim", Digest: "sha256:e"})
	}
	_, err = r.drain(t.Context(), h)
	require.NoError(t, err)
	assert.LessOrEqual(t, srv.unloads.Load(), int32(2), "the drain asked once more at most, and let the host go")
	assert.NotContains(t, h.Finalizers, HostFinalizer)
}

// updated takes every Update.
type updated struct{ client.Client }

func (updated) Update(context.Context, client.Object, ...client.UpdateOption) error { return nil }
