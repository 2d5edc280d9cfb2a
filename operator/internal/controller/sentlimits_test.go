package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// earlierHash is the hash an operator that hashed the spec alone, not
// the limits it sent, labelled a load of m with (m names no
// configuration, capabilities or Secrets).
func earlierHash(t testing.TB, m *v1alpha1.TinyModule, a placement.Artifact) string {
	t.Helper()
	require.True(t, m.Spec.Config == nil && m.Spec.Capabilities == nil && m.Spec.Secrets == nil)
	b, err := json.Marshal(struct {
		Name     string             `json:"name"`
		Artifact placement.Artifact `json:"artifact"`
		Limits   *v1alpha1.Limits   `json:"limits,omitempty"`
	}{m.Name, a, m.Spec.Limits})
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// TestSpecHashSentLimits: the hash covers the limits the operator sends:
// minInstances left out hashes as placement's default, which is sent,
// unlike the spec alone; an explicit minInstances hashes as before.
func TestSpecHashSentLimits(t *testing.T) {
	art := placement.Artifact{Image: "r/m:v1"}
	mod := func(l *v1alpha1.Limits) *v1alpha1.TinyModule {
		return &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.TinyModuleSpec{Image: "r/m:v1", Limits: l}}
	}
	def := mod(&v1alpha1.Limits{MinInstances: replicas(placement.DefaultMinInstances)})
	for _, l := range []*v1alpha1.Limits{nil, {}} {
		m := mod(l)
		assert.Equal(t, specHash(def, art), specHash(m, art), "the same load is sent")
		assert.NotEqual(t, earlierHash(t, m, art), specHash(m, art), "a load that sent no minInstances is reloaded")
	}
	for _, n := range []int32{0, 3} {
		m := mod(&v1alpha1.Limits{MinInstances: replicas(n)})
		assert.Equal(t, earlierHash(t, m, art), specHash(m, art), "minInstances %d was sent before too: no reload", n)
	}
}

// TestSpecHashReloadsEarlierDefault: a module whose spec leaves
// minInstances out, loaded by an earlier operator that sent none (the
// host's own default then holds: none warm, tinyhost --min-instances 0)
// and that recorded the hash of its spec alone (the load's label, the
// placement, the host's entry), is reloaded once by this operator with
// placement's default, one warm instance. After that its rounds load
// nothing: the host reports one upgrade of the module, and no other
// event through three probe intervals.
func TestSpecHashReloadsEarlierDefault(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a", args: []string{"--min-instances", "0"}})
	h := b.hosts["host-a"]
	ctx := ctxT(t, 5*time.Minute)
	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}}
	b.create(t, m)
	b.ready(t, "default", "hello", 2*time.Minute)
	b.mgr.Stop(t)

	// What the earlier operator left: the load, and its hash everywhere.
	art := artifactOf(m.Spec.Image, m.Spec.Source)
	earlier := earlierHash(t, m, art)
	req := LoadRequest{Artifact: art, Module: loadModule(m)}
	req.Module.Limits.MinInstances = nil
	req.Module.Labels = map[string]string{v1alpha1.LabelModuleNamespace: m.Namespace, v1alpha1.LabelSpecHash: earlier}
	mod, err := SourceLoader{}.Load(ctx, e2e.Client(t, h.Addr), req)
	require.NoError(t, err)
	require.Equal(t, uint32(0), mod.GetLimits().GetMinInstances(), "the host's own default")
	eventually(t, 30*time.Second, "the statuses as the earlier operator wrote them", func() error {
		tm := b.module(t, "default", "hello")
		for i := range tm.Status.Placements {
			tm.Status.Placements[i].SpecHash = earlier
		}
		if err := b.c.Status().Update(pollCtx(t), tm); err != nil {
			return err
		}
		th := b.host(t, "host-a")
		for i := range th.Status.Modules {
			if th.Status.Modules[i].Name == "hello" {
				th.Status.Modules[i].SpecHash = earlier
			}
		}
		return b.c.Status().Update(pollCtx(t), th)
	})

	var events e2e.HostEvents
	events.Watch(ctx, t, "host-a", h.Client, 1)
	b.start(b.tb)
	eventually(t, 2*time.Minute, "hello reloaded with one warm instance", func() error {
		resp, err := h.Client.ListModules(ctx, &hostv1.ListModulesRequest{})
		if err != nil {
			return err
		}
		for _, x := range resp.GetModules() {
			if x.GetName() == "hello" {
				if x.GetLimits().GetMinInstances() != placement.DefaultMinInstances || x.GetPool().GetInstances() != 1 {
					return fmt.Errorf("min_instances %d, pool %v", x.GetLimits().GetMinInstances(), x.GetPool())
				}
				return nil
			}
		}
		return fmt.Errorf("hello is not listed: %v", resp.GetModules())
	})
	b.ready(t, "default", "hello", time.Minute)
	want := []string{"host-a TYPE_UPGRADED hello"}
	assert.Never(t, func() bool { return !slices.Equal(events.Seen(), want) }, 3*b.opts.ProbeInterval, 50*time.Millisecond,
		"host events other than %q", want)
	assert.Equal(t, want, events.Seen(), "the host's loads since the earlier operator's")
	t.Logf("host events since the earlier operator's load: %v", events.Seen())
}
