package k8s_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
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
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/internal/image"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// The modules of the manifests: package, and repository in the registry.
var modules = []struct{ name, pkg string }{
	{"hello", "examples/hello"},
	{"common", "plugins/common"},
	{"tally", "examples/flow/tally"},
}

// container is the host that runs in a container of the tinyhost image.
const container = "host-1"

// hostNamespace is where the hosts register: their Leases and the
// TinyModules of the modules they load on their own.
const hostNamespace = "tinyhost-system"

// TestKubernetes runs this directory's README against a real kube-apiserver
// and etcd, the operator binary and three tinyhosts that register
// themselves, each with the permissions of config/host and nothing more:
// host-1 in a container of the tinyhost image (built as `make images`
// builds it, run by podman and runc on the machine's network), host-2 and
// host-3 as processes. kubectl get tinyhosts lists them; kubectl apply the
// manifests, kubectl wait for Ready, call a component and across modules;
// a module placed on the container host by its selector serves there; the
// Tiny Systems TinyModule gets a Service and an EndpointSlice; a .wasm dropped
// into the container host's directory is a TinyModule that a process
// host's component calls by name, gone with its file; a host SIGSTOPped is
// NotReady by its Lease, and once back runs only what is placed on it; the
// container host stopped (podman stop: SIGTERM)
// drains, removes its TinyHost and its modules are Ready elsewhere;
// restart the operator and see nothing loaded twice; delete a TinyModule
// and see it unloaded from every host.
func TestKubernetes(t *testing.T) {
	outer := t
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cp := startControlPlane(t)
	reg := startRegistry(t)
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	operator := e2e.Binary(t, "cmd/tinyhost-operator")

	// Publish the modules, as a component author does; the Tiny Systems module
	// under its name there.
	for _, m := range modules {
		res := e2e.Run(t, nil, tinyctl, "push", e2e.Wasm(t, m.pkg), reg+"/tinyhost/"+m.name+":0.1.0", "--plain-http", reg)
		require.Zero(t, res.Code, "%s%s", res.Stdout, res.Stderr)
	}
	res := e2e.Run(t, nil, tinyctl, "push", e2e.Wasm(t, "plugins/common"), reg+"/tiny-systems/common-module:v1.0.0", "--plain-http", reg)
	require.Zero(t, res.Code, "%s%s", res.Stdout, res.Stderr)

	// The hosts' identity: config/host's service account, nothing more.
	out := cp.kubectl(t, "create", "namespace", hostNamespace)
	out += cp.kubectl(t, "apply", "-k", "operator/config/host")
	t.Logf("kubectl apply -k operator/config/host:\n%s", out)
	hostKubeconfig := cp.impersonating(t, "system:serviceaccount:"+hostNamespace+":tinyhost")

	// mTLS everywhere, with a role in each certificate: the Secrets the
	// manifests mount, made as the READMEs say; the hosts and the operator
	// read them as their pods would.
	ip := e2e.LocalIP(t)
	tls := secrets(t, cp, ip)
	invoke := tls.tinyctl()
	dir := manifests(t, reg)
	podNameVerifies(t, filepath.Join(dir, "host-pods.yaml"), tls.host)
	// The image as the README names it: the reference `make images` wrote
	// into bin/images/tinyhost.ref, put in place of the manifest's name.
	ref := image.Ref{Name: "tinyhost", Repository: "tinyhost", Tag: e2e.ImageVersion}.String()
	podsFile := filepath.Join(dir, "host-pods.yaml")
	pods, err := os.ReadFile(podsFile)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(pods), "image: tinyhost:dev"), "the README's sed replaces the one image of host-pods.yaml")
	require.NoError(t, os.WriteFile(podsFile, []byte(strings.ReplaceAll(string(pods), "image: tinyhost:dev", "image: "+ref)), 0o644))
	out = cp.kubectl(t, "apply", "--dry-run=server", "-f", podsFile)
	t.Logf("sed 's|image: tinyhost:dev|image: %s|' host-pods.yaml | kubectl apply --dry-run=server -f - (no pods run here):\n%s", ref, out)
	assert.Equal(t, ref, cp.kubectl(t, "apply", "--dry-run=server", "-f", podsFile,
		"-o", `jsonpath={.items[?(@.kind=="StatefulSet")].spec.template.spec.containers[0].image}`))
	out = cp.kubectl(t, "apply", "--dry-run=server", "-k", "operator/config/default")
	t.Logf("kubectl apply --dry-run=server -k operator/config/default (the operator runs as a process here):\n%s", out)

	// The operator as config/manager runs it: hosts over mTLS.
	opArgs := append([]string{"--zap-log-level=debug"}, tls.operatorArgs()...)
	op := e2e.StartOperator(t, operator, cp.kubeconfig, opArgs...)

	// Three hosts that register themselves, on an address an EndpointSlice
	// takes, with the flags of host-pods.yaml; host-1 runs in a container
	// of the tinyhost image, which reads the kubeconfig and the certificates
	// mounted at their paths; host-3 renews a Lease of 2 s twice a second.
	hosts := map[string]*e2e.Host{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, zone := range []string{"zone-a", "zone-b", "zone-c"} {
		name := fmt.Sprintf("host-%d", i+1)
		// A module a host loads from its directory gets the host's default
		// capabilities: hostcalls, dropped into host-2's, calls echo.
		args := []string{"--name", name, "--listen", ip + ":0", "--artifacts-plain-http", reg,
			"--register", "--kubeconfig", hostKubeconfig, "--label", "topology.kubernetes.io/zone=" + zone,
			"--capabilities", "log,config,messaging"}
		args = append(args, tls.hostArgs()...)
		if name == "host-3" {
			args = append(args, "--lease-duration=2s", "--lease-renew-interval=500ms")
		}
		o := e2e.HostOptions{Args: args}
		if name == container {
			o.Container, o.Mounts = true, []string{hostKubeconfig, tls.host}
		}
		wg.Go(func() {
			h := e2e.StartHost(t, o)
			mu.Lock()
			hosts[name] = h
			mu.Unlock()
		})
	}
	wg.Wait()
	waitFor(ctx, t, "three TinyHosts Ready", func() error {
		out, err := cp.kubectlErr(ctx, "get", "tinyhosts", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "host-1=True host-2=True host-3=True" {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
	t.Logf("kubectl get tinyhosts (registered by themselves; %s in container %s):\n%s", container, hosts[container].Container(),
		cp.kubectl(t, "get", "tinyhosts", "--show-labels"))
	// The container host is the image's build: its version is the image's.
	waitFor(ctx, t, container+" reports the image's version", func() error {
		if v := cp.kubectl(t, "get", "tinyhost/"+container, "-o", "jsonpath={.status.version}"); v != e2e.ImageVersion {
			return fmt.Errorf("version %q", v)
		}
		return nil
	})

	out = cp.kubectl(t, "apply", "-f", filepath.Join(dir, "namespace.yaml"))
	out += cp.kubectl(t, "apply", "-f", filepath.Join(dir, "hello.yaml"), "-f", filepath.Join(dir, "common.yaml"), "-f", filepath.Join(dir, "tally.yaml"))
	t.Logf("kubectl apply (modules):\n%s", out)
	out = cp.kubectl(t, "wait", "--for=condition=Ready", "-n", "tinysystems", "--timeout=3m",
		"tinymodule/hello", "tinymodule/common", "tinymodule/tally")
	t.Logf("kubectl wait:\n%s", out)
	cp.getWide(t, "after kubectl wait")

	t.Run("a call through a host", func(t *testing.T) {
		addr := cp.placementAddr(t, "tinysystems", "hello")
		res := e2e.Run(t, invoke, tinyctl, "--addr", addr, "call", "hello/greeter", `{"name":"Ada"}`)
		require.Zero(t, res.Code, res.Stderr)
		assert.JSONEq(t, `{"greeting":"Hello, Ada!"}`, res.Stdout)
		t.Logf("tinyctl --addr %s call hello/greeter '{\"name\":\"Ada\"}'\n%s", addr, res.Stdout)
	})

	t.Run("mTLS: a client without a certificate of the hosts' CA is refused", func(t *testing.T) {
		addr := cp.placementAddr(t, "tinysystems", "hello")
		res := e2e.Run(t, invoke[:1], tinyctl, "--addr", addr, "call", "hello/greeter", `{"name":"Ada"}`)
		assert.Equal(t, 4, res.Code, "%s%s", res.Stdout, res.Stderr)
		t.Logf("tinyctl --tls-ca ca.crt (no client certificate) --addr %s call hello/greeter -> exit %d: %s", addr, res.Code, strings.TrimSpace(res.Stderr))
	})

	t.Run("roles: the invoke certificate cannot load a module", func(t *testing.T) {
		addr := cp.placementAddr(t, "tinysystems", "hello")
		res := e2e.Run(t, invoke, tinyctl, "--addr", addr, "load", e2e.Wasm(t, "examples/hello"), "--name", "intruder")
		assert.Equal(t, 5, res.Code, "%s%s", res.Stdout, res.Stderr)
		assert.Contains(t, res.Stderr, "PERMISSION_DENIED")
		assert.Contains(t, res.Stderr, "admin")
		t.Logf("tinyctl (invoke certificate) --addr %s load hello.wasm --name intruder -> exit %d: %s", addr, res.Code, strings.TrimSpace(res.Stderr))
	})

	t.Run("a cross-module call", func(t *testing.T) {
		crossModule(t, cp, tinyctl, invoke)
	})

	t.Run("the container host: a module placed on it serves there", func(t *testing.T) {
		m := filepath.Join(t.TempDir(), "greeter-a.yaml")
		require.NoError(t, os.WriteFile(m, []byte(`apiVersion: operator.tinysystems.io/v1alpha1
kind: TinyModule
metadata: {name: greeter-a, namespace: tinysystems}
spec:
  image: `+reg+`/tinyhost/hello:0.1.0
  hostSelector: {matchLabels: {topology.kubernetes.io/zone: zone-a}}
`), 0o644))
		out := cp.kubectl(t, "apply", "-f", m)
		out += cp.kubectl(t, "wait", "--for=condition=Ready", "-n", "tinysystems", "--timeout=2m", "tinymodule/greeter-a")
		t.Logf("kubectl apply -f greeter-a.yaml (hello, on zone-a: %s, the container):\n%s", container, out)
		assert.Equal(t, []string{container}, readyHosts(cp.module(t, "tinysystems", "greeter-a")))
		addr := cp.placementAddr(t, "tinysystems", "greeter-a")
		require.Equal(t, hosts[container].Addr, addr)
		res := e2e.Run(t, invoke, tinyctl, "--addr", addr, "call", "greeter-a/greeter", `{"name":"Ada"}`)
		require.Zero(t, res.Code, res.Stderr)
		assert.JSONEq(t, `{"greeting":"Hello, Ada!"}`, res.Stdout)
		t.Logf("tinyctl --addr %s (%s, in container %s) call greeter-a/greeter '{\"name\":\"Ada\"}'\n%s", addr, container, hosts[container].Container(), res.Stdout)

		// Free to run anywhere, it stays where it runs (a placement that
		// passes the filters is kept), until its host stops below.
		cp.kubectl(t, "patch", "tinymodule/greeter-a", "-n", "tinysystems", "--type=merge", "-p", `{"spec":{"hostSelector":null}}`)
		waitFor(ctx, t, "greeter-a's selector dropped, observed", func() error {
			m := cp.module(t, "tinysystems", "greeter-a")
			if m.Status.ObservedGeneration != m.Generation || m.Status.State != v1alpha1.StateReady {
				return fmt.Errorf("generation %d, observed %d, %s", m.Generation, m.Status.ObservedGeneration, m.Status.State)
			}
			return nil
		})
		assert.Equal(t, []string{container}, readyHosts(cp.module(t, "tinysystems", "greeter-a")))
	})

	t.Run("the status fields", func(t *testing.T) {
		out := cp.kubectl(t, "get", "tinymodule/hello", "-n", "tinysystems", "-o", "yaml")
		t.Logf("kubectl get tinymodule/hello -n tinysystems -o yaml:\n%s", out)
		var m v1alpha1.TinyModule
		require.NoError(t, yaml.Unmarshal([]byte(out), &m))
		st := m.Status
		assert.Equal(t, "hello.tinysystems.svc:50051", st.Address)
		assert.Equal(t, m.Generation, st.ObservedGeneration)
		assert.Equal(t, m.Generation, st.AppliedGeneration)
		assert.NotNil(t, st.LastObservedAt)
		assert.NotNil(t, st.LastAppliedAt)
		assert.Equal(t, v1alpha1.StateReady, st.State)
		require.Len(t, st.Inventory, 2)
		for _, it := range st.Inventory {
			assert.Equal(t, v1alpha1.PhaseReady, it.Phase, it.Host)
			assert.True(t, strings.HasPrefix(it.Digest, "sha256:"), it.Host)
		}
		for _, c := range []string{v1alpha1.ConditionScheduled, v1alpha1.ConditionReady, v1alpha1.ConditionDegraded} {
			assert.NotNil(t, meta.FindStatusCondition(st.Conditions, c), c)
		}
	})

	t.Run("kubectl scale tinymodule/hello --replicas 3: three Ready, through the scale subresource", func(t *testing.T) {
		out := cp.kubectl(t, "scale", "tinymodule/hello", "-n", "tinysystems", "--replicas", "3")
		t.Logf("kubectl scale tinymodule/hello -n tinysystems --replicas 3:\n%s", out)
		waitFor(ctx, t, "hello on three hosts", func() error {
			m := cp.module(t, "tinysystems", "hello")
			if m.Status.ObservedGeneration != m.Generation || m.Status.ReadyReplicas != 3 || len(readyHosts(m)) != 3 {
				return fmt.Errorf("generation %d observed %d, %d ready on %v", m.Generation, m.Status.ObservedGeneration, m.Status.ReadyReplicas, readyHosts(m))
			}
			return nil
		})
		out = cp.kubectl(t, "wait", "--for=condition=Ready", "-n", "tinysystems", "--timeout=1m", "tinymodule/hello")
		t.Logf("kubectl wait:\n%s", out)
		t.Logf("kubectl get tinymodule/hello -n tinysystems -o wide:\n%s", cp.kubectl(t, "get", "tinymodule/hello", "-n", "tinysystems", "-o", "wide"))
		// What kubectl scale and a HorizontalPodAutoscaler read.
		raw := cp.kubectl(t, "get", "--raw", "/apis/operator.tinysystems.io/v1alpha1/namespaces/tinysystems/tinymodules/hello/scale")
		t.Logf("kubectl get --raw .../tinymodules/hello/scale:\n%s", raw)
		var scale struct {
			Kind   string
			Spec   struct{ Replicas int32 }
			Status struct {
				Replicas int32
				Selector string
			}
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &scale))
		assert.Equal(t, "Scale", scale.Kind)
		assert.Equal(t, int32(3), scale.Spec.Replicas)
		assert.Equal(t, int32(3), scale.Status.Replicas)
		assert.Equal(t, "kubernetes.io/service-name=hello", scale.Status.Selector)
		// The selector selects the module's EndpointSlices: one endpoint
		// per Ready placement.
		waitFor(ctx, t, "hello's EndpointSlices list three hosts", func() error {
			got, err := cp.endpoints(ctx, "tinysystems", "hello")
			if err != nil {
				return err
			}
			if len(got) != 3 {
				return fmt.Errorf("endpoints %v", got)
			}
			return nil
		})
		t.Logf("kubectl get endpointslices -n tinysystems -l %s:\n%s", scale.Status.Selector,
			cp.kubectl(t, "get", "endpointslices", "-n", "tinysystems", "-l", scale.Status.Selector))

		// Back to two: the later steps count on a host free of hello.
		cp.kubectl(t, "scale", "tinymodule/hello", "-n", "tinysystems", "--replicas", "2")
		waitFor(ctx, t, "hello back on two hosts", func() error {
			m := cp.module(t, "tinysystems", "hello")
			if m.Status.ObservedGeneration != m.Generation || m.Status.Replicas != 2 || len(m.Status.Placements) != 2 || len(readyHosts(m)) != 2 {
				return fmt.Errorf("generation %d observed %d, placements %v", m.Generation, m.Status.ObservedGeneration, m.Status.Placements)
			}
			return nil
		})
	})

	t.Run("the Tiny Systems TinyModule: a Service and an EndpointSlice once Ready", func(t *testing.T) {
		out := cp.kubectl(t, "apply", "-f", filepath.Join(dir, "tinymodule_tinysystems.yaml"))
		out += cp.kubectl(t, "wait", "--for=condition=Ready", "-n", "tinysystems", "--timeout=2m", "tinymodule/common-module-v1")
		t.Logf("kubectl apply -f operator/config/samples/tinymodule_tinysystems.yaml (ghcr.io is this test's registry):\n%s", out)
		m := cp.module(t, "tinysystems", "common-module-v1")
		assert.Equal(t, "common-module-v1.tinysystems.svc:50051", m.Status.Address)
		host := readyHosts(m)
		require.Len(t, host, 1)
		waitFor(ctx, t, "the EndpointSlice of common-module-v1", func() error {
			got, err := cp.endpoints(ctx, "tinysystems", "common-module-v1")
			if err != nil {
				return err
			}
			if want := map[string]string{host[0]: hosts[host[0]].Addr}; fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("endpoints %v, want %v", got, want)
			}
			return nil
		})
		t.Logf("kubectl get service/common-module-v1 -n tinysystems -o wide:\n%s", cp.kubectl(t, "get", "service/common-module-v1", "-n", "tinysystems", "-o", "wide"))
		t.Logf("kubectl get endpointslices -n tinysystems -l kubernetes.io/service-name=common-module-v1:\n%s",
			cp.kubectl(t, "get", "endpointslices", "-n", "tinysystems", "-l", "kubernetes.io/service-name=common-module-v1"))
	})

	t.Run("a .wasm dropped into host-1's directory (a container): a TinyModule, called by name from host-2 (a process)", func(t *testing.T) {
		echo := filepath.Join(t.TempDir(), "echo.wasm")
		require.NoError(t, os.WriteFile(echo, e2e.Guest(t, "echo"), 0o644))
		caller := filepath.Join(t.TempDir(), "hostcalls.wasm")
		require.NoError(t, os.WriteFile(caller, e2e.Guest(t, "hostcalls"), 0o644))
		e2e.CopyFile(t, echo, filepath.Join(hosts["host-1"].ModulesDir, "echo.wasm"))
		e2e.CopyFile(t, caller, filepath.Join(hosts["host-2"].ModulesDir, "hostcalls.wasm"))
		for _, name := range []string{"echo", "hostcalls"} {
			waitFor(ctx, t, "TinyModule "+name, func() error {
				return cp.client.Get(ctx, types.NamespacedName{Namespace: hostNamespace, Name: name}, &v1alpha1.TinyModule{})
			})
		}
		out := cp.kubectl(t, "wait", "--for=condition=Ready", "-n", hostNamespace, "--timeout=2m", "tinymodule/echo", "tinymodule/hostcalls")
		t.Logf("kubectl wait:\n%s", out)
		t.Logf("kubectl get tinymodules -n %s -o wide:\n%s", hostNamespace, cp.kubectl(t, "get", "tinymodules", "-n", hostNamespace, "-o", "wide"))
		comps := cp.kubectl(t, "get", "tinymodule/echo", "-n", hostNamespace, "-o", "jsonpath={.spec.providedBy} {.status.components[*].name}")
		assert.Equal(t, "host-1 echo", comps)

		// Ready comes up to the pusher's half second before other hosts'
		// route tables name the module (operator/README.md): a caller
		// elsewhere retries "has no route", and only that.
		var res e2e.Result
		waitFor(ctx, t, "host-2 routes echo", func() error {
			res = e2e.Run(t, invoke, tinyctl, "--addr", hosts["host-2"].Addr, "call", "hostcalls/caller/call", "echo/echo/in hello from host-2")
			if res.Code != 0 && strings.Contains(res.Stderr, `module "echo" is not loaded here and has no route`) {
				return errors.New(strings.TrimSpace(res.Stderr))
			}
			return nil
		})
		require.Zero(t, res.Code, res.Stderr)
		assert.Contains(t, res.Stdout, "hello from host-2")
		t.Logf("tinyctl --addr <host-2> call hostcalls/caller/call 'echo/echo/in hello from host-2' -> %s", strings.TrimSpace(res.Stdout))

		require.NoError(t, os.Remove(filepath.Join(hosts["host-1"].ModulesDir, "echo.wasm")))
		waitFor(ctx, t, "TinyModule echo gone with its file", func() error {
			err := cp.client.Get(ctx, types.NamespacedName{Namespace: hostNamespace, Name: "echo"}, &v1alpha1.TinyModule{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	})

	t.Run("a host SIGSTOPped: NotReady by its Lease, and once back it runs only what is placed on it", func(t *testing.T) {
		h := hosts["host-3"]
		h.Signal(t, syscall.SIGSTOP)
		stopped := time.Now()
		cont := sync.OnceFunc(func() { h.Signal(t, syscall.SIGCONT) })
		t.Cleanup(cont)
		var reason string
		waitFor(ctx, t, "host-3 NotReady", func() error {
			var th v1alpha1.TinyHost
			if err := cp.client.Get(ctx, types.NamespacedName{Name: "host-3"}, &th); err != nil {
				return err
			}
			c := meta.FindStatusCondition(th.Status.Conditions, v1alpha1.ConditionHostReady)
			if c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("condition %+v", c)
			}
			reason = c.Reason
			return nil
		})
		// How soon follows from its Lease of 2 s and from how busy the
		// machine is: logged, not bounded (`make bench-operator` measures
		// host loss).
		t.Logf("host-3 SIGSTOPped: NotReady (%s) after %v", reason, time.Since(stopped).Round(10*time.Millisecond))
		assert.Equal(t, "LeaseExpired", reason)
		cont()
		waitFor(ctx, t, "host-3 Ready again", func() error {
			return cp.hostReady(ctx, "host-3")
		})
		// Its modules may have moved while it was NotReady; the copies it
		// still has are unloaded once no host routes to them, so that the
		// later steps start from hosts that run what is placed on them.
		back := time.Now()
		clients := dialAll(t, hosts, tls.client)
		waitFor(ctx, t, "every host runs what is placed on it", func() error {
			return cp.converged(ctx, clients)
		})
		t.Logf("host-3 back: every host runs what is placed on it after %v", time.Since(back).Round(10*time.Millisecond))
	})

	t.Run("the container host stopped (podman stop, SIGTERM): it drains, its TinyHost goes, its modules Ready elsewhere", func(t *testing.T) {
		victim := container
		var moving []string
		for _, name := range []string{"hello", "common", "tally", "greeter-a"} {
			if slices.Contains(readyHosts(cp.module(t, "tinysystems", name)), victim) {
				moving = append(moving, name)
			}
		}
		require.Contains(t, moving, "greeter-a")
		h := hosts[victim]
		// host-pods.yaml's terminationGracePeriodSeconds.
		h.Stop(t, 40*time.Second)
		termed := time.Now()
		code := h.Wait(t, 45*time.Second)
		assert.Zero(t, code, "exit code of the container")
		t.Logf("podman stop %s: the container exited %d after %v", h.Container(), code, time.Since(termed).Round(10*time.Millisecond))
		assert.Contains(t, h.Log(), "shutting down: answering the calls in flight")
		assert.Contains(t, h.Log(), `"@message":"stopped"`)
		delete(hosts, victim)
		waitFor(ctx, t, "TinyHost "+victim+" gone", func() error {
			err := cp.client.Get(ctx, types.NamespacedName{Name: victim}, &v1alpha1.TinyHost{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		err := cp.client.Get(ctx, types.NamespacedName{Namespace: hostNamespace, Name: victim}, &coordinationv1.Lease{})
		assert.True(t, apierrors.IsNotFound(err), "its Lease: %v", err)
		for _, name := range moving {
			waitFor(ctx, t, name+" Ready off "+victim, func() error {
				m := cp.module(t, "tinysystems", name)
				ready := readyHosts(m)
				want := 1
				if m.Spec.Replicas != nil {
					want = int(*m.Spec.Replicas)
				}
				if len(ready) != want || slices.Contains(ready, victim) {
					return fmt.Errorf("ready on %v", ready)
				}
				return nil
			})
		}
		t.Logf("SIGTERM to %s (it ran %v): TinyHost gone and all Ready elsewhere after %v", victim, moving, time.Since(termed).Round(10*time.Millisecond))
		clients := dialAll(t, hosts, tls.client)
		waitFor(ctx, t, "every host runs what is placed on it", func() error {
			return cp.converged(ctx, clients)
		})
		t.Logf("kubectl get tinyhosts:\n%s", cp.kubectl(t, "get", "tinyhosts"))
		crossModule(t, cp, tinyctl, invoke)
	})

	t.Run("the operator restarted: nothing loaded twice and nothing dropped", func(t *testing.T) {
		before := map[string]map[string]int64{}
		var events e2e.HostEvents
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		for name, h := range hosts {
			c := dial(t, h.Addr, tls.client)
			before[name] = e2e.LoadedAt(ctx, t, c)
			events.Watch(wctx, t, name, c, len(before[name]))
		}
		op.Stop(t)
		op = e2e.StartOperator(outer, operator, cp.kubeconfig, opArgs...)
		cp.waitLeader(ctx, t, op)
		// Over a few probes of every host and a pass of both controllers,
		// no host loads anything.
		assert.Never(t, func() bool { return len(events.Seen()) > 0 }, 5*time.Second, 50*time.Millisecond,
			"host events after the operator restarted")
		assert.Empty(t, events.Seen(), "host events after the operator restarted")
		for name, h := range hosts {
			assert.Equal(t, before[name], e2e.LoadedAt(ctx, t, dial(t, h.Addr, tls.client)), "modules on %s and when they were loaded", name)
		}
		cp.kubectl(t, "wait", "--for=condition=Ready", "-n", "tinysystems", "--timeout=2m",
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
		require.NoError(t, op.Ready())
	})

	t.Run("a TinyModule deleted: unloaded from every host", func(t *testing.T) {
		out := cp.kubectl(t, "delete", "tinymodule/hello", "-n", "tinysystems", "--timeout=1m")
		t.Logf("kubectl delete:\n%s", out)
		for name, h := range hosts {
			_, loaded := e2e.LoadedAt(ctx, t, dial(t, h.Addr, tls.client))["hello"]
			assert.False(t, loaded, "hello still loaded on %s", name)
		}
	})

	cp.getWide(t, "at the end")
}

// crossModule sends three items to common/split on its host; the wiring and
// routes the operator pushed carry them to tally on its host.
func crossModule(t *testing.T, cp *controlPlane, tinyctl string, creds []string) {
	t.Helper()
	common := cp.placementAddr(t, "tinysystems", "common")
	tally := cp.placementAddr(t, "tinysystems", "tally")
	total := func() map[string]float64 {
		res := e2e.Run(t, creds, tinyctl, "--addr", tally, "call", "tally/counter/total", "{}")
		require.Zero(t, res.Code, res.Stderr)
		var tot map[string]float64
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &tot), res.Stdout)
		return tot
	}
	start := total()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Ready says the modules serve where they are placed; the route table
	// that takes common's split to tally reaches common's host up to the
	// pusher's half second later (operator/README.md).
	var res e2e.Result
	waitFor(ctx, t, "common's host routes to tally", func() error {
		res = e2e.Run(t, creds, tinyctl, "--addr", common, "call", "common/split/in", "[1, 2, 3]")
		if res.Code != 0 {
			return fmt.Errorf("exit %d: %s", res.Code, res.Stderr)
		}
		return nil
	})
	assert.JSONEq(t, `{"count":3}`, res.Stdout)
	waitFor(ctx, t, "the items counted by tally on "+tally, func() error {
		got := total()
		if got["count"]-start["count"] != 3 || got["sum"]-start["sum"] != 6 {
			return fmt.Errorf("total went from %v to %v", start, got)
		}
		return nil
	})
	t.Logf("tinyctl --addr %s call common/split/in '[1, 2, 3]' -> %s; tally on %s counted them: %v", common, strings.TrimSpace(res.Stdout), tally, total())
}

// manifests copies the manifests of this directory, and the Tiny Systems
// TinyModule, into a temporary directory, with the registry of the test
// in place of the manifests' own.
func manifests(t *testing.T, reg string) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	files = append(files, filepath.Join(e2e.Root(t), "operator", "config", "samples", "tinymodule_tinysystems.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		s := strings.ReplaceAll(string(b), "registry.example.com", reg)
		s = strings.ReplaceAll(s, "ghcr.io", reg)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o644))
	}
	return dir
}

// controlPlane is kube-apiserver and etcd with the CRDs installed.
type controlPlane struct {
	*kubetest.Env
	kubeconfig string
	client     client.Client
}

func startControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	env := kubetest.Start(t)
	return &controlPlane{Env: env, kubeconfig: env.Kubeconfig, client: env.Client}
}

// impersonating is a kubeconfig of the admin acting as user, with user's
// permissions only.
func (cp *controlPlane) impersonating(t *testing.T, user string) string {
	t.Helper()
	b, err := os.ReadFile(cp.kubeconfig)
	require.NoError(t, err)
	var kc map[string]any
	require.NoError(t, yaml.Unmarshal(b, &kc))
	for _, u := range kc["users"].([]any) {
		u.(map[string]any)["user"].(map[string]any)["as"] = user
	}
	out, err := yaml.Marshal(kc)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "as-host.kubeconfig")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

// kubectl runs bin/kubectl and fails the test if it fails.
func (cp *controlPlane) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := cp.kubectlErr(ctx, args...)
	require.NoError(t, err, out)
	return out
}

func (cp *controlPlane) kubectlErr(ctx context.Context, args ...string) (string, error) {
	return cp.Kubectl(ctx, args...)
}

// getWide logs `kubectl get tinymodules,tinyhosts -A -o wide`.
func (cp *controlPlane) getWide(t *testing.T, when string) {
	t.Helper()
	t.Logf("kubectl get tinymodules,tinyhosts -A -o wide (%s):\n%s", when, cp.kubectl(t, "get", "tinymodules,tinyhosts", "-A", "-o", "wide"))
}

func (cp *controlPlane) module(t *testing.T, ns, name string) *v1alpha1.TinyModule {
	t.Helper()
	var m v1alpha1.TinyModule
	// A read polled by waitFor may still run when the wait is over; the end
	// of the test must not cancel it into a failure.
	require.NoError(t, cp.client.Get(context.WithoutCancel(t.Context()), types.NamespacedName{Namespace: ns, Name: name}, &m))
	return &m
}

// placementAddr is the address of a host where the module is Ready: from
// outside the cluster, where its Service's name does not resolve.
func (cp *controlPlane) placementAddr(t *testing.T, ns, name string) string {
	t.Helper()
	for _, p := range cp.module(t, ns, name).Status.Placements {
		if p.Phase == v1alpha1.PhaseReady {
			return p.Address
		}
	}
	t.Fatalf("%s/%s is Ready nowhere", ns, name)
	return ""
}

func (cp *controlPlane) hostReady(ctx context.Context, name string) error {
	var th v1alpha1.TinyHost
	if err := cp.client.Get(ctx, types.NamespacedName{Name: name}, &th); err != nil {
		return err
	}
	if !meta.IsStatusConditionTrue(th.Status.Conditions, v1alpha1.ConditionHostReady) {
		return fmt.Errorf("%s not Ready: %v", name, th.Status.Conditions)
	}
	return nil
}

// converged is nil when each host of clients runs exactly the modules of
// namespace tinysystems that are Ready on it, per the host's own list, and
// every placement of those modules is Ready.
func (cp *controlPlane) converged(ctx context.Context, clients map[string]hostv1.HostServiceClient) error {
	var mods v1alpha1.TinyModuleList
	if err := cp.client.List(ctx, &mods, client.InNamespace("tinysystems")); err != nil {
		return err
	}
	ours := map[string]bool{}
	want := map[string][]string{}
	for _, m := range mods.Items {
		ours[m.Name] = true
		for _, p := range m.Status.Placements {
			if p.Phase != v1alpha1.PhaseReady {
				return fmt.Errorf("%s on %s: %s %s", m.Name, p.Host, p.Phase, p.Message)
			}
			want[p.Host] = append(want[p.Host], m.Name)
		}
	}
	for name, c := range clients {
		resp, err := c.ListModules(ctx, &hostv1.ListModulesRequest{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		var got []string
		for _, m := range resp.GetModules() {
			if ours[m.GetName()] {
				got = append(got, m.GetName())
			}
		}
		slices.Sort(got)
		slices.Sort(want[name])
		if !slices.Equal(got, want[name]) {
			return fmt.Errorf("%s runs %v, placed there: %v", name, got, want[name])
		}
	}
	return nil
}

// endpoints are the module's EndpointSlices' endpoints, host:port by the
// TinyHost each names.
func (cp *controlPlane) endpoints(ctx context.Context, ns, name string) (map[string]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := cp.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			out[e.TargetRef.Name] = fmt.Sprintf("%s:%d", e.Addresses[0], *s.Ports[0].Port)
		}
	}
	return out, nil
}

// waitLeader waits until the operator holds the lease and is ready.
func (cp *controlPlane) waitLeader(ctx context.Context, t *testing.T, op *e2e.Operator) {
	t.Helper()
	waitFor(ctx, t, "the operator to lead", func() error {
		var l coordinationv1.Lease
		key := types.NamespacedName{Namespace: hostNamespace, Name: "tinyhost-operator.operator.tinysystems.io"}
		if err := cp.client.Get(ctx, key, &l); err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		return op.Ready()
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

// dial is a client of the host at addr with the certificates in the
// directory certs.
func dial(t *testing.T, addr, certs string) hostv1.HostServiceClient {
	t.Helper()
	c, err := hostclient.New(addr, hostclient.Options{
		CAFile: filepath.Join(certs, "ca.crt"), CertFile: filepath.Join(certs, "tls.crt"), KeyFile: filepath.Join(certs, "tls.key"),
	})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c.RPC()
}

// dialAll is a client of each of hosts, by name.
func dialAll(t *testing.T, hosts map[string]*e2e.Host, certs string) map[string]hostv1.HostServiceClient {
	t.Helper()
	out := make(map[string]hostv1.HostServiceClient, len(hosts))
	for name, h := range hosts {
		out[name] = dial(t, h.Addr, certs)
	}
	return out
}

// waitFor is testify's EventuallyWithT for a cond that says why it does
// not hold yet: it polls cond every 100ms until it returns nil or ctx's
// deadline passes, and fails with cond's last error.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() error) {
	t.Helper()
	d := 10 * time.Minute
	if end, ok := ctx.Deadline(); ok {
		d = time.Until(end)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, cond()) }, d, 100*time.Millisecond, what)
}
