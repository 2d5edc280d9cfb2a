package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestModuleCapabilities: a TinyModule with capabilities [none] is loaded
// with none at all, which the host's ListModules shows; naming a messaging
// target reloads it with that grant, and omitting the field with the
// host's defaults.
func TestModuleCapabilities(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	h := b.hosts["host-a"]
	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec:       v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Capabilities: []v1alpha1.Capability{v1alpha1.CapabilityNone}},
	})
	b.ready(t, "default", "hello", 2*time.Minute)

	grantedOnHost := func(want ...string) {
		t.Helper()
		eventually(t, 2*time.Minute, fmt.Sprintf("hello loaded with %v", want), func() error {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			resp, err := h.Client.ListModules(ctx, &hostv1.ListModulesRequest{})
			if err != nil {
				return err
			}
			for _, m := range resp.GetModules() {
				if m.GetName() != "hello" {
					continue
				}
				got := slices.Sorted(slices.Values(m.GetCapabilities()))
				if !slices.Equal(got, want) {
					return fmt.Errorf("granted %v", got)
				}
				return nil
			}
			return fmt.Errorf("not loaded")
		})
	}
	grantedOnHost()
	out, err := invoke(ctxT(t, time.Minute), t, h.Addr, "hello", "greeter", `{"name":"Ada"}`)
	require.NoError(t, err, "hello needs no capability to greet")
	require.Contains(t, out, "Ada")

	b.update(t, "default", "hello", func(m *v1alpha1.TinyModule) {
		m.Spec.Capabilities = []v1alpha1.Capability{"log", "messaging:common/ticker"}
	})
	grantedOnHost("log", "messaging:common/ticker")

	b.update(t, "default", "hello", func(m *v1alpha1.TinyModule) { m.Spec.Capabilities = nil })
	grantedOnHost("config", "log")
}
