package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestLoadOfAnotherNamespace: a load under way for a TinyModule that is
// deleted meanwhile is not taken as the load of the same spec by another
// namespace's TinyModule of that name placed on the host: the host runs
// the module loaded for the newcomer, with its namespace, not the one
// loaded for the module that is gone.
func TestLoadOfAnotherNamespace(t *testing.T) {
	held := &heldLoader{module: "shared", started: make(chan struct{}), release: make(chan struct{})}
	b := newBedWith(t, bedOptions{loader: func(l Loader) Loader { held.Loader = l; return held }}, hostSpec{name: "host-a"})
	ctx := ctxT(t, 5*time.Minute)
	namespace(t, b.c, "team-a")
	namespace(t, b.c, "team-b")
	spec := v1alpha1.TinyModuleSpec{Image: b.hello.Ref}

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shared"}, Spec: spec})
	select {
	case <-held.started:
	case <-ctx.Done():
		t.Fatal("team-a/shared's load never began")
	}
	b.remove(t, "team-a", "shared")
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "shared"}, Spec: spec})
	eventually(t, time.Minute, "host-a's status lists team-b/shared", func() error {
		for _, e := range b.host(t, "host-a").Status.Modules {
			if e.Name == "shared" && e.Namespace == "team-b" {
				return nil
			}
		}
		return fmt.Errorf("modules %+v", b.host(t, "host-a").Status.Modules)
	})
	close(held.release)

	eventually(t, time.Minute, "shared loaded on host-a for team-b", func() error {
		list, err := b.hosts["host-a"].Client.ListModules(ctx, &hostv1.ListModulesRequest{})
		if err != nil {
			return err
		}
		for _, m := range list.GetModules() {
			if m.GetName() == "shared" {
				if ns := m.GetLabels()[v1alpha1.LabelModuleNamespace]; ns != "team-b" {
					return fmt.Errorf("loaded for %q", ns)
				}
				return nil
			}
		}
		return fmt.Errorf("not loaded")
	})
	m := b.ready(t, "team-b", "shared", time.Minute)
	require.Len(t, m.Status.Placements, 1)
	assert.Equal(t, "host-a", m.Status.Placements[0].Host)
}
