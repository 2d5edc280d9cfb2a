package main_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/host/api"
	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

// TestRegister: tinyhost --register against a real apiserver. A host
// creates its TinyHost (address and labels), a host whose TinyHost was
// written by hand takes it over and keeps the labels it does not own,
// each renews its Lease, none writes status, and SIGTERM deletes what it
// created. A host whose apiserver is out of reach serves regardless.
func TestRegister(t *testing.T) {
	env := kubetest.Start(t)
	ctx := ctxFor(t, 3*time.Minute)
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hosts"}}))
	// h2 was registered by hand before: another address, a label of its own.
	require.NoError(t, c.Create(ctx, &v1alpha1.TinyHost{
		ObjectMeta: metav1.ObjectMeta{Name: "h2", Labels: map[string]string{"team": "x", "zone": "old"}},
		Spec:       v1alpha1.TinyHostSpec{Address: "10.0.0.9:50051"},
	}))
	start := func(name, zone string) *e2e.Host {
		return e2e.StartHost(t, e2e.HostOptions{Args: []string{"--register", "--kubeconfig", env.Kubeconfig,
			"--name", name, "--namespace", "hosts", "--label", "zone=" + zone}})
	}
	h1, h2 := start("h1", "a"), start("h2", "b")

	for _, tt := range []struct {
		host   *e2e.Host
		name   string
		labels map[string]string
	}{
		{h1, "h1", map[string]string{"zone": "a"}},
		{h2, "h2", map[string]string{"zone": "b", "team": "x"}},
	} {
		t.Run(tt.name+" registered", func(t *testing.T) {
			var th v1alpha1.TinyHost
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				require.NoError(ct, c.Get(ctx, crclient.ObjectKey{Name: tt.name}, &th))
				assert.Equal(ct, tt.host.Addr, th.Spec.Address)
				assert.Equal(ct, tt.labels, th.Labels)
			}, 30*time.Second, 50*time.Millisecond)
			var managers []string
			for _, mf := range th.ManagedFields {
				if mf.Manager == "tinyhost" {
					managers = append(managers, string(mf.Operation)+" "+mf.Subresource)
				}
			}
			assert.Equal(t, []string{"Apply "}, managers, "the host applies its TinyHost and writes no status")
			var l coordinationv1.Lease
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				require.NoError(ct, c.Get(ctx, crclient.ObjectKey{Namespace: "hosts", Name: tt.name}, &l))
				assert.Equal(ct, tt.name, *l.Spec.HolderIdentity)
				assert.Equal(ct, int32(3), *l.Spec.LeaseDurationSeconds)
			}, 30*time.Second, 50*time.Millisecond)
			first := l.Spec.RenewTime.Time
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				require.NoError(ct, c.Get(ctx, crclient.ObjectKey{Namespace: "hosts", Name: tt.name}, &l))
				assert.True(ct, l.Spec.RenewTime.After(first), "renewed")
			}, 10*time.Second, 100*time.Millisecond)
			require.Len(t, l.OwnerReferences, 1)
			assert.Equal(t, th.UID, l.OwnerReferences[0].UID, "the Lease goes with the TinyHost")
		})
	}

	t.Run("the modules a host loads on its own are TinyModules provided by it", func(t *testing.T) {
		hello := e2e.Wasm(t, "examples/hello")
		e2e.CopyFile(t, hello, filepath.Join(h1.ModulesDir, "hello.wasm"))
		e2e.LoadModule(t, e2e.Client(t, h1.Addr), "loaded", hello, api.Limits{})
		// What the operator loads is the operator's: the labels it loads
		// with say so.
		wasm, err := os.ReadFile(hello)
		require.NoError(t, err)
		_, err = e2e.Client(t, h1.Addr).Load(ctx, hostclient.Module{Name: "placed", Wasm: wasm,
			Labels: map[string]string{v1alpha1.LabelModuleNamespace: "apps", v1alpha1.LabelSpecHash: "h"}})
		require.NoError(t, err)
		// A TinyModule of the name that is not the host's is left alone.
		require.NoError(t, c.Create(ctx, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "hosts", Name: "taken"},
			Spec: v1alpha1.TinyModuleSpec{Image: "r/taken:v1"}}))
		e2e.LoadModule(t, e2e.Client(t, h1.Addr), "taken", hello, api.Limits{})

		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			assert.Equal(ct, map[string]string{"hello": "h1", "loaded": "h1", "taken": ""}, provided(ctx, ct, c))
		}, 30*time.Second, 50*time.Millisecond)
		var th v1alpha1.TinyHost
		require.NoError(t, c.Get(ctx, crclient.ObjectKey{Name: "h1"}, &th))
		var m v1alpha1.TinyModule
		require.NoError(t, c.Get(ctx, crclient.ObjectKey{Namespace: "hosts", Name: "hello"}, &m))
		require.Len(t, m.OwnerReferences, 1)
		assert.Equal(t, th.UID, m.OwnerReferences[0].UID, "the TinyModule goes with the TinyHost")
		require.Eventually(t, func() bool {
			return strings.Contains(h1.Log(), "module not published: TinyModule hosts/taken exists and is not this host's")
		}, 10*time.Second, 50*time.Millisecond)

		require.NoError(t, os.Remove(filepath.Join(h1.ModulesDir, "hello.wasm")))
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			assert.Equal(ct, map[string]string{"loaded": "h1", "taken": ""}, provided(ctx, ct, c))
		}, 30*time.Second, 50*time.Millisecond, "the file deleted, its TinyModule goes")
	})

	t.Run("SIGTERM deletes the TinyHost, the Lease and the host's TinyModules", func(t *testing.T) {
		h1.Signal(t, syscall.SIGTERM)
		assert.Zero(t, h1.Wait(t, 30*time.Second))
		err := c.Get(ctx, crclient.ObjectKey{Name: "h1"}, &v1alpha1.TinyHost{})
		assert.True(t, apierrors.IsNotFound(err), "TinyHost h1: %v", err)
		err = c.Get(ctx, crclient.ObjectKey{Namespace: "hosts", Name: "h1"}, &coordinationv1.Lease{})
		assert.True(t, apierrors.IsNotFound(err), "Lease h1: %v", err)
		assert.NoError(t, c.Get(ctx, crclient.ObjectKey{Name: "h2"}, &v1alpha1.TinyHost{}), "h2 stays")
		assert.Equal(t, map[string]string{"taken": ""}, provided(ctx, t, c))
	})

	t.Run("an apiserver out of reach: the host serves, and says why it is not registered", func(t *testing.T) {
		kubeconfig := unreachableKubeconfig(t)
		h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--register", "--kubeconfig", kubeconfig, "--name", "h3"}})
		_, err := client(t, h.Addr).Info(ctx, &hostv1.InfoRequest{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			return strings.Contains(h.Log(), "cannot register the TinyHost; the host serves regardless")
		}, 30*time.Second, 50*time.Millisecond, h.Log())
	})
}

// provided lists the TinyModules of namespace hosts with their
// spec.providedBy.
func provided(ctx context.Context, t require.TestingT, c crclient.Client) map[string]string {
	var list v1alpha1.TinyModuleList
	require.NoError(t, c.List(ctx, &list, crclient.InNamespace("hosts")))
	out := map[string]string{}
	for _, m := range list.Items {
		out[m.Name] = m.Spec.ProvidedBy
	}
	return out
}

// unreachableKubeconfig names an apiserver on a port nobody listens on.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return e2e.ConfigFile(t, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, addr))
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
