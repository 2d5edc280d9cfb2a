package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestPortSchemasBudget: the port schemas a host reported go into the
// status in descriptor order while they fit the bound; a schema past it is
// left out and its port says so, a port without schema says nothing.
func TestPortSchemasBudget(t *testing.T) {
	small := `{"type":"string"}`
	big := `{"type":"string","description":"` + strings.Repeat("x", 100) + `"}`
	mod := &hostv1.Module{Digest: "sha256:s", Version: "1.0.0", Components: []*hostv1.Component{
		{Name: "a", Ports: []*hostv1.Port{
			{Name: "in", Direction: "input", Schema: small},
			{Name: "out", Direction: "output"},
		}},
		{Name: "b", Ports: []*hostv1.Port{
			{Name: "in", Direction: "input", Schema: big},
			{Name: "in2", Direction: "input", Schema: small},
		}},
	}}
	d := newDescriptors(2*len(small) + 10) // room for both small ones, not the big one
	d.add("h", mod)
	got, ok := d.get("h", "sha256:s")
	require.True(t, ok)
	assert.Equal(t, []v1alpha1.ComponentStatus{
		{Name: "a", Ports: []v1alpha1.PortStatus{
			{Name: "in", Direction: "input", Schema: small},
			{Name: "out", Direction: "output"},
		}},
		{Name: "b", Ports: []v1alpha1.PortStatus{
			{Name: "in", Direction: "input", SchemaOmitted: true},
			{Name: "in2", Direction: "input", Schema: small},
		}},
	}, got.Components)
}
