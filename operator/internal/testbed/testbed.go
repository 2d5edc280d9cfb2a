// Package testbed sets up what the operator's tests run against, all real:
// an OCI registry in the test process holding modules built from source,
// tinyhost processes registered as TinyHosts, and the operator's manager
// in the test process. The control plane comes from kubetest.
package testbed

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

// Main runs a test package's tests and removes what they built. What
// controller-runtime logs outside a manager (its global logger) is dropped;
// each manager's log goes to its test.
func Main(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	return e2e.Main(m)
}

// Packages of the modules the tests push, relative to the repository root.
const (
	Hello  = "examples/hello"
	Common = "plugins/common"
)

// Registry is an OCI registry served over plain HTTP on 127.0.0.1.
type Registry struct {
	// Host is host:port, the registry part of its references.
	Host string
	srv  *httptest.Server
}

// StartRegistry starts an empty registry for the test.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(srv.Close)
	return &Registry{Host: strings.TrimPrefix(srv.URL, "http://"), srv: srv}
}

// Module is a module pushed to the registry.
type Module struct {
	// Ref is the tag pushed, registry/repo:tag.
	Ref string
	// Digest is "sha256:<hex>" of the wasm.
	Digest string
	// Descriptor is what the module says of itself.
	Descriptor host.ModuleInfo
}

// Push builds the component module at pkg from source, reads its
// descriptor by loading it into a host in the test process (as a publisher
// would), and pushes it to repoTag ("tinyhost/hello:0.1.0").
func (r *Registry) Push(t testing.TB, pkg, repoTag string) Module {
	t.Helper()
	return r.PushBytes(t, e2e.WasmBytes(t, pkg), repoTag)
}

// PushBytes pushes the module wasm to repoTag.
func (r *Registry) PushBytes(t testing.TB, wasm []byte, repoTag string) Module {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, err := host.New(ctx, host.Options{Logger: hclog.NewNullLogger(), CacheDir: e2e.CacheDir(t)})
	require.NoError(t, err)
	defer h.Close(ctx)
	info, err := h.Load(ctx, wasm, host.LoadOptions{})
	require.NoError(t, err)

	c, err := artifact.New(r.ClientOptions())
	require.NoError(t, err)
	ref := r.Host + "/" + repoTag
	pushed, err := c.Push(ctx, ref, wasm, info.Descriptor, artifact.PushOptions{})
	require.NoError(t, err)
	return Module{Ref: ref, Digest: pushed.WasmDigest, Descriptor: info}
}

// ClientOptions reach the registry: plain HTTP to it, no credentials.
func (r *Registry) ClientOptions() artifact.Options {
	return artifact.Options{PlainHTTP: []string{r.Host}, DockerConfig: emptyDockerConfig()}
}

var dockerConfigOnce = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "testbed-docker-")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		panic(err)
	}
	return path
})

// emptyDockerConfig is a docker config without credentials, so that the
// developer's own never takes part.
func emptyDockerConfig() string { return dockerConfigOnce() }

// Host is a tinyhost process and a client of it.
type Host struct {
	*e2e.Host
	Name   string
	Client hostv1.HostServiceClient
}

// StartHost starts a tinyhost process named name, with more flags in args.
func StartHost(t testing.TB, name string, args ...string) *Host {
	t.Helper()
	h := e2e.StartHost(t, e2e.HostOptions{Args: append([]string{"--name", name}, args...)})
	return &Host{Host: h, Name: name, Client: Dial(t, h.Addr)}
}

// Dial is a client of the host at addr.
func Dial(t testing.TB, addr string) hostv1.HostServiceClient {
	t.Helper()
	return e2e.Client(t, addr).RPC()
}

// Loaded returns the host's modules by name, with their digests.
func (h *Host) Loaded(ctx context.Context) (map[string]string, error) {
	resp, err := h.Client.ListModules(ctx, &hostv1.ListModulesRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range resp.GetModules() {
		out[m.GetName()] = m.GetDigest()
	}
	return out, nil
}

// Register creates the host's TinyHost, with labels.
func Register(t testing.TB, c client.Client, name, addr string, labels map[string]string) *v1alpha1.TinyHost {
	t.Helper()
	th := &v1alpha1.TinyHost{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1alpha1.TinyHostSpec{Address: addr},
	}
	require.NoError(t, c.Create(context.Background(), th))
	return th
}

// Manager is the operator's manager running in the test process.
type Manager struct {
	ctrl.Manager
	cancel context.CancelFunc
	done   chan error
	stop   sync.Once
	logs   *e2e.LogBuffer
}

// StartManager starts a manager against env after setup added the
// controllers to it, and stops it when the test ends. Its logs go to the
// test's log if the test fails.
func StartManager(t testing.TB, env *kubetest.Env, setup func(ctrl.Manager) error) *Manager {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	logs := &e2e.LogBuffer{}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 zap.New(zap.WriteTo(logs), zap.UseDevMode(true)),
		// Tests start a manager more than once in a process.
		Controller: config.Controller{SkipNameValidation: ptr(true)},
	})
	require.NoError(t, err)
	require.NoError(t, setup(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{Manager: mgr, cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { m.done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		m.Stop(t)
		if t.Failed() {
			t.Logf("operator log:\n%s", logs.String())
		}
	})
	return m
}

// Stop stops the manager and waits until it has; again, it does nothing.
func (m *Manager) Stop(t testing.TB) {
	m.stop.Do(func() {
		m.cancel()
		select {
		case err := <-m.done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("manager did not stop within a minute")
		}
	})
}

func ptr[T any](v T) *T { return &v }

// Logs is what the manager has logged so far.
func (m *Manager) Logs() string { return m.logs.String() }
