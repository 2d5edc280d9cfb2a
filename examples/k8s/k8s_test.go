package k8s_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// The modules of the manifests: package, and repository in the registry.
var modules = []struct{ name, pkg string }{
	{"hello", "examples/hello"},
	{"common", "plugins/common"},
	{"tally", "examples/flow/tally"},
}

// TestKubernetes runs this directory's README against a real kube-apiserver
// and etcd, the operator binary and three tinyhost processes registered as
// TinyHosts: push the modules with tinyctl, kubectl apply the manifests,
// kubectl wait for Ready, call a component through a host and across
// modules; kill a host and see its modules Ready elsewhere; restart the
// operator and see nothing loaded twice and nothing dropped; delete a
// TinyModule and see it unloaded from every host.
func TestKubernetes(t *testing.T) {
	outer := t
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cp := startControlPlane(t)
	reg := startRegistry(t)
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	operator := e2e.Binary(t, "cmd/tinyhost-operator")

	// Publish the modules, as a component author does.
	for _, m := range modules {
		res := e2e.Run(t, nil, tinyctl, "push", e2e.Wasm(t, m.pkg), reg+"/tinyhost/"+m.name+":0.1.0", "--plain-http", reg)
		require.Zero(t, res.Code, "%s%s", res.Stdout, res.Stderr)
	}

	// Three hosts, which fetch modules from the registry themselves.
	hosts := make([]*e2e.Host, 3)
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hosts[i] = e2e.StartHost(t, e2e.HostOptions{Args: []string{"--name", fmt.Sprintf("host-%d", i+1), "--artifacts-plain-http", reg}})
		}()
	}
	wg.Wait()
	byName := map[string]*e2e.Host{}
	for i, h := range hosts {
		byName[fmt.Sprintf("host-%d", i+1)] = h
	}

	// The manifests as committed, pointed at this registry and these hosts.
	dir := manifests(t, reg, hosts)
	op := startOperator(t, operator, cp.kubeconfig)

	out := cp.kubectl(t, "apply", "-f", filepath.Join(dir, "namespace.yaml"), "-f", filepath.Join(dir, "hosts.yaml"))
	t.Logf("kubectl apply (hosts):\n%s", out)
	out = cp.kubectl(t, "apply", "-f", filepath.Join(dir, "hello.yaml"), "-f", filepath.Join(dir, "common.yaml"), "-f", filepath.Join(dir, "tally.yaml"))
	t.Logf("kubectl apply (modules):\n%s", out)
	out = cp.kubectl(t, "wait", "--for=condition=Ready", "-n", "tinysystems", "--timeout=3m",
		"tinymodule/hello", "tinymodule/common", "tinymodule/tally")
	t.Logf("kubectl wait:\n%s", out)
	cp.getWide(t, "after kubectl wait")

	t.Run("a call through a host", func(t *testing.T) {
		addr := cp.kubectl(t, "get", "tinymodule/hello", "-n", "tinysystems", "-o", "jsonpath={.status.address}")
		res := e2e.Run(t, nil, tinyctl, "--addr", addr, "call", "hello/greeter", `{"name":"Ada"}`)
		require.Zero(t, res.Code, res.Stderr)
		assert.JSONEq(t, `{"greeting":"Hello, Ada!"}`, res.Stdout)
		t.Logf("tinyctl --addr %s call hello/greeter '{\"name\":\"Ada\"}'\n%s", addr, res.Stdout)
	})

	t.Run("a cross-module call", func(t *testing.T) {
		crossModule(t, cp, tinyctl)
		addr := cp.kubectl(t, "get", "tinymodule/common", "-n", "tinysystems", "-o", "jsonpath={.status.address}")
		res := e2e.Run(t, nil, tinyctl, "--addr", addr, "routes")
		require.Zero(t, res.Code, res.Stderr)
		t.Logf("tinyctl --addr %s routes (pushed by the operator):\n%s", addr, res.Stdout)
	})

	t.Run("a host killed: its modules Ready elsewhere", func(t *testing.T) {
		m := cp.module(t, "hello")
		victim := m.Status.Placements[0].Host
		var moving []string
		for _, name := range []string{"hello", "common", "tally"} {
			for _, p := range cp.module(t, name).Status.Placements {
				if p.Host == victim {
					moving = append(moving, name)
				}
			}
		}
		h := byName[victim]
		h.Signal(t, syscall.SIGKILL)
		killed := time.Now()
		h.Wait(t, 10*time.Second)
		delete(byName, victim)
		for _, name := range moving {
			waitFor(ctx, t, name+" Ready off "+victim, func() error {
				m := cp.module(t, name)
				ready := readyHosts(m)
				want := int(1)
				if m.Spec.Replicas != nil {
					want = int(*m.Spec.Replicas)
				}
				if len(ready) != want || slices.Contains(ready, victim) {
					return fmt.Errorf("ready on %v", ready)
				}
				return nil
			})
		}
		t.Logf("killed %s (it ran %v): all Ready elsewhere after %v", victim, moving, time.Since(killed).Round(10*time.Millisecond))
		cp.getWide(t, "after killing "+victim)
		crossModule(t, cp, tinyctl)
	})

	t.Run("the operator restarted: nothing loaded twice and nothing dropped", func(t *testing.T) {
		before := map[string]map[string]int64{}
		var events e2e.HostEvents
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		for name, h := range byName {
			c := dial(t, h.Addr)
			before[name] = e2e.LoadedAt(ctx, t, c)
			events.Watch(wctx, t, name, c, len(before[name]))
		}
		op.stop(t)
		op = startOperator(outer, operator, cp.kubeconfig)
		cp.waitLeader(ctx, t, op)
		// Over a few probes of every host and a pass of both controllers,
		// no host loads anything.
		assert.Never(t, func() bool { return len(events.Seen()) > 0 }, 5*time.Second, 50*time.Millisecond,
			"host events after the operator restarted")
		assert.Empty(t, events.Seen(), "host events after the operator restarted")
		for name, h := range byName {
			assert.Equal(t, before[name], e2e.LoadedAt(ctx, t, dial(t, h.Addr)), "modules on %s and when they were loaded", name)
		}
		cp.kubectl(t, "wait", "--for=condition=Ready", "-n", "tinysystems", "--timeout=10s",
			"tinymodule/hello", "tinymodule/common", "tinymodule/tally")
	})

	t.Run("a bad spec is refused and the operator keeps going", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		require.NoError(t, os.WriteFile(bad, []byte(`apiVersion: operator.tinysystems.io/v1alpha1
kind: TinyModule
metadata: {name: bad, namespace: tinysystems}
spec: {replicas: -1}
`), 0o644))
		out, err := cp.kubectlErr(ctx, "apply", "-f", bad)
		require.Error(t, err)
		assert.Contains(t, out, "spec.replicas")
		assert.Contains(t, out, "spec.image or spec.source is required")
		t.Logf("kubectl apply -f bad.yaml:\n%s", out)
		require.NoError(t, op.alive())
	})

	t.Run("a TinyModule deleted: unloaded from every host", func(t *testing.T) {
		out := cp.kubectl(t, "delete", "tinymodule/hello", "-n", "tinysystems", "--timeout=1m")
		t.Logf("kubectl delete:\n%s", out)
		for name, h := range byName {
			_, loaded := e2e.LoadedAt(ctx, t, dial(t, h.Addr))["hello"]
			assert.False(t, loaded, "hello still loaded on %s", name)
		}
	})

	cp.getWide(t, "at the end")
}

// crossModule sends three items to common/split on its host; the wiring and
// routes the operator pushed carry them to tally on its host.
func crossModule(t *testing.T, cp *controlPlane, tinyctl string) {
	t.Helper()
	common := cp.kubectl(t, "get", "tinymodule/common", "-n", "tinysystems", "-o", "jsonpath={.status.address}")
	tally := cp.kubectl(t, "get", "tinymodule/tally", "-n", "tinysystems", "-o", "jsonpath={.status.address}")
	total := func() map[string]float64 {
		res := e2e.Run(t, nil, tinyctl, "--addr", tally, "call", "tally/counter/total", "{}")
		require.Zero(t, res.Code, res.Stderr)
		var tot map[string]float64
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &tot), res.Stdout)
		return tot
	}
	start := total()
	res := e2e.Run(t, nil, tinyctl, "--addr", common, "call", "common/split/in", "[1, 2, 3]")
	require.Zero(t, res.Code, res.Stderr)
	assert.JSONEq(t, `{"count":3}`, res.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitFor(ctx, t, "the items counted by tally on "+tally, func() error {
		got := total()
		if got["count"]-start["count"] != 3 || got["sum"]-start["sum"] != 6 {
			return fmt.Errorf("total went from %v to %v", start, got)
		}
		return nil
	})
	t.Logf("tinyctl --addr %s call common/split/in '[1, 2, 3]' -> %s; tally on %s counted them: %v", common, strings.TrimSpace(res.Stdout), tally, total())
}

// manifests copies the manifests of this directory into a temporary one,
// with the registry of the test and the addresses of its hosts.
func manifests(t *testing.T, reg string, hosts []*e2e.Host) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		s := strings.ReplaceAll(string(b), "registry.example.com", reg)
		for i, h := range hosts {
			s = strings.ReplaceAll(s, fmt.Sprintf("10.0.12.%d:50051", i+1), h.Addr)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644))
	}
	return dir
}

// controlPlane is kube-apiserver and etcd with the CRDs installed.
type controlPlane struct {
	kubeconfig, assets string
	client             client.Client
}

func startControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	root := e2e.Root(t)
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	for _, name := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(assets, name)); err != nil {
			t.Fatalf("no %s in %s (KUBEBUILDER_ASSETS): run `make envtest` to build it", name, assets)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "operator", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, env.KubeConfig, 0o600))
	return &controlPlane{kubeconfig: kubeconfig, assets: assets, client: c}
}

// kubectl runs bin/kubectl and fails the test if it fails.
func (cp *controlPlane) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := cp.kubectlErr(ctx, args...)
	require.NoError(t, err, out)
	return out
}

func (cp *controlPlane) kubectlErr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(cp.assets, "kubectl"), append([]string{"--kubeconfig", cp.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// getWide logs `kubectl get tinymodules,tinyhosts -A -o wide`.
func (cp *controlPlane) getWide(t *testing.T, when string) {
	t.Helper()
	t.Logf("kubectl get tinymodules,tinyhosts -A -o wide (%s):\n%s", when, cp.kubectl(t, "get", "tinymodules,tinyhosts", "-A", "-o", "wide"))
}

func (cp *controlPlane) module(t *testing.T, name string) *v1alpha1.TinyModule {
	t.Helper()
	var m v1alpha1.TinyModule
	require.NoError(t, cp.client.Get(context.Background(), types.NamespacedName{Namespace: "tinysystems", Name: name}, &m))
	return &m
}

// waitLeader waits until the operator holds the lease and is ready.
func (cp *controlPlane) waitLeader(ctx context.Context, t *testing.T, op *operatorProcess) {
	t.Helper()
	waitFor(ctx, t, "the operator to lead", func() error {
		var l coordinationv1.Lease
		key := types.NamespacedName{Namespace: "default", Name: "tinyhost-operator.operator.tinysystems.io"}
		if err := cp.client.Get(ctx, key, &l); err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		return op.ready()
	})
}

func readyHosts(m *v1alpha1.TinyModule) []string {
	var hs []string
	for _, p := range m.Status.Placements {
		if p.Phase == v1alpha1.PhaseReady {
			hs = append(hs, p.Host)
		}
	}
	return hs
}

// startRegistry serves an OCI registry over plain HTTP; it returns its
// host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// operatorProcess is the operator binary, running.
type operatorProcess struct {
	cmd    *exec.Cmd
	probes string
	logs   *e2e.LogBuffer
	exited chan struct{}
	err    error
}

func startOperator(t *testing.T, bin, kubeconfig string) *operatorProcess {
	t.Helper()
	op := &operatorProcess{probes: freeAddr(t), logs: &e2e.LogBuffer{}, exited: make(chan struct{})}
	op.cmd = exec.Command(bin, "--leader-elect", "--leader-election-namespace=default",
		"--health-probe-bind-address="+op.probes, "--metrics-bind-address=0", "--zap-log-level=debug")
	op.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	op.cmd.Stdout, op.cmd.Stderr = op.logs, op.logs
	require.NoError(t, op.cmd.Start())
	go func() { op.err = op.cmd.Wait(); close(op.exited) }()
	t.Cleanup(func() {
		op.stop(t)
		if t.Failed() {
			t.Logf("operator log:\n%s", op.logs.String())
		}
	})
	return op
}

// stop sends SIGTERM and waits for a clean exit.
func (op *operatorProcess) stop(t *testing.T) {
	select {
	case <-op.exited:
		return
	default:
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.exited:
		if op.err != nil {
			t.Errorf("operator: %v\n%s", op.err, op.logs.String())
		}
	case <-time.After(30 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.exited
		t.Errorf("the operator ignored SIGTERM for 30s")
	}
}

// alive is nil while the operator runs.
func (op *operatorProcess) alive() error {
	select {
	case <-op.exited:
		return fmt.Errorf("the operator exited: %v\n%s", op.err, op.logs.String())
	default:
		return op.ready()
	}
}

func (op *operatorProcess) ready() error {
	resp, err := http.Get("http://" + op.probes + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

func dial(t *testing.T, addr string) hostv1.HostServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return hostv1.NewHostServiceClient(cc)
}

// waitFor polls cond every 100ms until it returns nil or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() error) {
	t.Helper()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
