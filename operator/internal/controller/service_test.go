package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/shard"
)

// TestEndpointSlices: the Ready placements, grouped by address type and
// port; what an EndpointSlice refuses is left out and said why.
func TestEndpointSlices(t *testing.T) {
	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}}
	m.Status.Placements = []v1alpha1.Placement{
		{Host: "a", Address: "10.0.0.1:50051", Phase: v1alpha1.PhaseReady},
		{Host: "b", Address: "10.0.0.2:50051", Phase: v1alpha1.PhaseReady},
		{Host: "c", Address: "10.0.0.3:7000", Phase: v1alpha1.PhaseReady},
		{Host: "d", Address: "[fd00::4]:50051", Phase: v1alpha1.PhaseReady},
		{Host: "e", Address: "host-e.example.com:50051", Phase: v1alpha1.PhaseReady},
		{Host: "f", Address: "10.0.0.6:50051", Phase: v1alpha1.PhaseLoading},
		{Host: "g", Address: "127.0.0.1:50051", Phase: v1alpha1.PhaseReady},
		{Host: "h", Address: "localhost:50051", Phase: v1alpha1.PhaseReady},
		{Host: "i", Address: "169.254.0.9:50051", Phase: v1alpha1.PhaseReady},
	}
	got, skipped := endpointSlices(m)
	byName := map[string][]string{}
	for name, s := range got {
		for _, e := range s.Endpoints {
			byName[name] = append(byName[name], e.TargetRef.Name+"="+e.Addresses[0])
		}
	}
	assert.Equal(t, map[string][]string{
		"m-ipv4-50051": {"a=10.0.0.1", "b=10.0.0.2"},
		"m-ipv4-7000":  {"c=10.0.0.3"},
		"m-ipv6-50051": {"d=fd00::4"},
		"m-fqdn-50051": {"e=host-e.example.com"},
	}, byName)
	assert.Equal(t, discoveryv1.AddressTypeIPv6, got["m-ipv6-50051"].AddressType)
	assert.Equal(t, int32(7000), *got["m-ipv4-7000"].Ports[0].Port)
	assert.Len(t, skipped, 3, "loopback, a name that is not fully qualified, link-local: %v", skipped)
	assert.Equal(t, "m.ns.svc:50051", serviceAddress(m))
}

// TestLeaseState: a Lease expires leaseDurationSeconds after its renewal
// (or acquisition); one never renewed has expired; no Lease, no expiry.
func TestLeaseState(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(t0.Add(d)); return &m }
	secs := func(n int32) *int32 { return &n }
	tests := []struct {
		name    string
		spec    coordinationv1.LeaseSpec
		now     time.Duration
		expired bool
	}{
		{"renewed, within its duration", coordinationv1.LeaseSpec{RenewTime: at(0), LeaseDurationSeconds: secs(3)}, 2999 * time.Millisecond, false},
		{"renewed, at its expiry", coordinationv1.LeaseSpec{RenewTime: at(0), LeaseDurationSeconds: secs(3)}, 3 * time.Second, true},
		{"acquired, not renewed yet", coordinationv1.LeaseSpec{AcquireTime: at(0), LeaseDurationSeconds: secs(3)}, time.Second, false},
		{"no times", coordinationv1.LeaseSpec{LeaseDurationSeconds: secs(3)}, 0, true},
		{"no duration", coordinationv1.LeaseSpec{RenewTime: at(0)}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := leaseState{Tracked: true, Expires: shard.Expiry(&coordinationv1.Lease{Spec: tt.spec})}
			assert.Equal(t, tt.expired, s.Expired(t0.Add(tt.now)))
		})
	}
	assert.False(t, leaseState{}.Expired(t0), "a host without a Lease")
}
