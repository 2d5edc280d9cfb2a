package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// TestMinInstancesDefaultAgrees: a TinyModule that leaves minInstances
// out, placed on a host whose own default is none warm (tinyhost
// --min-instances 0), is loaded there with one warm instance, as
// placement counted it: the host lists it with min_instances 1 and one
// instance, and the TinyHost's status.allocated.memory is what placement
// counted for it (memoryPages × 64 KiB).
func TestMinInstancesDefaultAgrees(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a", args: []string{"--min-instances", "0"}})
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	spec := v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Limits: &v1alpha1.Limits{MemoryPages: replicas(512)}}
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "hello"}, Spec: spec})
	m := b.ready(t, "default", "hello", 2*time.Minute)
	addr := readyAddr(m)
	require.NotEmpty(t, addr, "a Ready placement's address: %s", brief(m))

	var mod *hostv1.Module
	eventually(t, 2*time.Minute, "hello listed with one instance", func() error {
		res := e2e.Run(t, nil, tinyctl, "--addr", addr, "list", "-o", "json")
		if res.Code != 0 {
			return fmt.Errorf("tinyctl list: exit %d: %s", res.Code, res.Stderr)
		}
		var list hostv1.ListModulesResponse
		if err := protojson.Unmarshal([]byte(res.Stdout), &list); err != nil {
			return fmt.Errorf("tinyctl list -o json: %w\n%s", err, res.Stdout)
		}
		for _, x := range list.GetModules() {
			if x.GetName() == "hello" {
				mod = x
				if x.GetPool().GetInstances() != 1 {
					return fmt.Errorf("pool: %v", x.GetPool())
				}
				return nil
			}
		}
		return fmt.Errorf("hello is not listed:\n%s", res.Stdout)
	})
	assert.Equal(t, uint32(placement.DefaultMinInstances), mod.GetLimits().GetMinInstances(), "the host's own default is 0")
	t.Logf("on the host: min_instances %d, pool %v", mod.GetLimits().GetMinInstances(), mod.GetPool())

	want := placement.Request(spec.Limits).Memory
	require.Equal(t, int64(512*64<<10), want)
	eventually(t, 2*time.Minute, "status.allocated.memory at what placement counted", func() error {
		a := b.host(t, "host-a").Status.Allocated
		if a == nil || a.Memory == nil || a.Memory.Value() != want {
			return fmt.Errorf("status.allocated: %+v, want memory %d", a, want)
		}
		return nil
	})
}

// TestObserveAllocated: the probe writes status.allocated as a load round
// does: the memory of the loaded modules' warm instances, not what the
// host holds with the instances beyond those alive at the probe.
func TestObserveAllocated(t *testing.T) {
	mods := []*hostv1.Module{
		{Name: "warm", Limits: &hostv1.ModuleLimits{MemoryPages: 256, MinInstances: new(uint32(2))}},
		{Name: "zero", Limits: &hostv1.ModuleLimits{MemoryPages: 512, MinInstances: new(uint32(0))}},
	}
	info := &hostv1.InfoResponse{
		Name: "host-a",
		// warm's two (32 MiB), and zero's busy instance (32 MiB).
		Capacity: &hostv1.Capacity{LoadedModules: 2, MemoryBytes: 1 << 30, MemoryReservedBytes: 64 << 20},
		Modules:  mods,
	}
	var st v1alpha1.TinyHostStatus
	observe(&st, &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "host-a"}}, info)
	require.NotNil(t, st.Allocated)
	assert.Equal(t, int32(2), *st.Allocated.Modules)
	assert.Equal(t, int64(32<<20), st.Allocated.Memory.Value(), "warm's two instances of 16 MiB")
	assert.Equal(t, allocated(slices.Values(mods)), st.Allocated, "as a load round writes it")
}
