package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestDescriptorsStayWithTheirHost: what one host reports for a digest
// describes the modules of that host only. A hostile host that lists
// another tenant's digest first, with components and a version of its
// own, does not put them in the status of that tenant's module on an
// honest host; and a host's descriptors go when it no longer lists the
// digest, or is gone, so a host that reports ever new digests holds no
// more than it lists.
func TestDescriptorsStayWithTheirHost(t *testing.T) {
	const digest = "sha256:e"
	descs := newDescriptors(DefaultMaxStatusSchemaBytes)
	descs.add("evil", &hostv1.Module{Digest: digest, Version: "6.6.6", Components: []*hostv1.Component{
		{Name: "forged", Ports: []*hostv1.Port{{Name: "in", Direction: "input", Schema: `{"type":"string"}`}}},
	}})
	descs.add("h1", &hostv1.Module{Digest: digest, Version: "1.0.0", Components: []*hostv1.Component{{Name: "echo"}}})

	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "hosts", Generation: 1},
		Spec: v1alpha1.TinyModuleSpec{ProvidedBy: "h1"}}
	h := v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "h1"}, Spec: v1alpha1.TinyHostSpec{Address: "10.0.0.1:50051"}}
	setHostReady(&h.Status, 1, true, "r", "")
	h.Status.Modules = []v1alpha1.HostModule{{Name: "echo", Phase: v1alpha1.PhaseUnmanaged, Digest: digest, Version: "1.0.0"}}
	st := (&modules{descs: descs}).decideProvided(m, []v1alpha1.TinyHost{h}, metav1.Now()).status
	require.Equal(t, v1alpha1.StateReady, st.State)
	assert.Equal(t, "1.0.0", st.Version)
	assert.Equal(t, []v1alpha1.ComponentStatus{{Name: "echo"}}, st.Components)

	descs.add("evil", &hostv1.Module{Digest: "sha256:f"})
	descs.retain("evil", []*hostv1.Module{{Digest: "sha256:f"}})
	_, ok := descs.get("evil", digest)
	assert.False(t, ok, "a digest the host no longer lists is forgotten")
	_, ok = descs.get("evil", "sha256:f")
	assert.True(t, ok)
	descs.forget("evil")
	_, ok = descs.get("evil", "sha256:f")
	assert.False(t, ok, "a gone host's descriptors are forgotten")
	_, ok = descs.get("h1", digest)
	assert.True(t, ok, "another host's are kept")
}
