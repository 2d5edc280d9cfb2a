package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

// TestAPI runs the CRDs on a real kube-apiserver: what kubectl shows, what
// the schema refuses and with which message, and the manifests under
// operator/config applied with kubectl.
func TestAPI(t *testing.T) {
	env := kubetest.Start(t)
	t.Logf("control plane started with the CRDs in %v", env.Started.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)

	t.Run("kubectl sees the server and the CRDs", func(t *testing.T) {
		out, err := env.Kubectl(ctx, "version")
		require.NoError(t, err)
		assert.Contains(t, out, "Server Version: v1.36.3")
		out, err = env.Kubectl(ctx, "get", "crds")
		require.NoError(t, err)
		assert.Contains(t, out, "tinymodules.operator.tinysystems.io")
		assert.Contains(t, out, "tinyhosts.operator.tinysystems.io")
	})

	t.Run("the samples apply with kubectl and the Tiny Systems manifest is kept as written", func(t *testing.T) {
		_, err := env.Kubectl(ctx, "apply", "-k", "operator/config/samples")
		require.NoError(t, err)

		var m v1alpha1.TinyModule
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: "tinysystems", Name: "common-module-v1"}, &m))
		assert.Equal(t, "ghcr.io/tiny-systems/common-module:v1.0.0", m.Spec.Image)
		assert.Nil(t, m.Spec.Replicas, "replicas stays absent (meaning one): placement mode EveryHost refuses it, so it has no default")

		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: "tinysystems", Name: "hello"}, &m))
		assert.JSONEq(t, `{"greeting":"Hello"}`, string(m.Spec.Config.Raw))
		assert.Equal(t, "2s", m.Spec.Limits.CallTimeout.Duration.String())
	})

	t.Run("kubectl apply -k config/default installs the operator", func(t *testing.T) {
		out, err := env.Kubectl(ctx, "apply", "-k", "operator/config/default")
		require.NoError(t, err)
		for _, want := range []string{
			"namespace/tinyhost-system",
			"customresourcedefinition.apiextensions.k8s.io/tinymodules.operator.tinysystems.io",
			"serviceaccount/tinyhost-operator",
			"clusterrole.rbac.authorization.k8s.io/tinyhost-operator",
			"clusterrolebinding.rbac.authorization.k8s.io/tinyhost-operator",
			"role.rbac.authorization.k8s.io/tinyhost-operator-leader-election",
			"service/tinyhost-operator-metrics",
			"deployment.apps/tinyhost-operator",
		} {
			assert.Contains(t, out, want)
		}
		out, err = env.Kubectl(ctx, "-n", "tinyhost-system", "get", "deployment", "tinyhost-operator", "-o", "jsonpath={.spec.template.spec.serviceAccountName} {.spec.template.spec.containers[0].image}")
		require.NoError(t, err)
		assert.Equal(t, "tinyhost-operator tinyhost-operator:dev", out)
		out, err = env.Kubectl(ctx, "get", "clusterrolebinding", "tinyhost-operator", "-o", "jsonpath={.subjects[0].namespace}")
		require.NoError(t, err)
		assert.Equal(t, "tinyhost-system", out)
	})

	t.Run("kubectl apply -k config/host lets host pods register themselves, and no more", func(t *testing.T) {
		out, err := env.Kubectl(ctx, "apply", "-k", "operator/config/host")
		require.NoError(t, err)
		for _, want := range []string{"serviceaccount/tinyhost", "clusterrole.rbac.authorization.k8s.io/tinyhost-host",
			"role.rbac.authorization.k8s.io/tinyhost-host", "rolebinding.rbac.authorization.k8s.io/tinyhost-host"} {
			assert.Contains(t, out, want)
		}
		as := "--as=system:serviceaccount:tinyhost-system:tinyhost"
		for _, tt := range []struct {
			verb, resource, sub, ns, want string
		}{
			// Its TinyHost: applied (create, patch), read, deleted.
			{"create", "tinyhosts.operator.tinysystems.io", "", "", "yes"},
			{"patch", "tinyhosts.operator.tinysystems.io", "", "", "yes"},
			{"get", "tinyhosts.operator.tinysystems.io", "", "", "yes"},
			{"delete", "tinyhosts.operator.tinysystems.io", "", "", "yes"},
			{"update", "tinyhosts.operator.tinysystems.io", "", "", "no"},
			// What kubectl delete and wait watch it with.
			{"list", "tinyhosts.operator.tinysystems.io", "", "", "yes"},
			{"watch", "tinyhosts.operator.tinysystems.io", "", "", "yes"},
			{"update", "tinyhosts.operator.tinysystems.io", "status", "", "no"},
			{"patch", "tinyhosts.operator.tinysystems.io", "status", "", "no"},
			// Its Lease, in its namespace.
			{"create", "leases.coordination.k8s.io", "", "tinyhost-system", "yes"},
			{"get", "leases.coordination.k8s.io", "", "tinyhost-system", "yes"},
			{"update", "leases.coordination.k8s.io", "", "tinyhost-system", "yes"},
			{"delete", "leases.coordination.k8s.io", "", "tinyhost-system", "yes"},
			{"update", "leases.coordination.k8s.io", "", "kube-system", "no"},
			{"list", "leases.coordination.k8s.io", "", "tinyhost-system", "no"},
			// The TinyModules of its own modules, in its namespace.
			{"create", "tinymodules.operator.tinysystems.io", "", "tinyhost-system", "yes"},
			{"list", "tinymodules.operator.tinysystems.io", "", "tinyhost-system", "yes"},
			{"delete", "tinymodules.operator.tinysystems.io", "", "tinyhost-system", "yes"},
			{"update", "tinymodules.operator.tinysystems.io", "", "tinyhost-system", "no"},
			{"update", "tinymodules.operator.tinysystems.io", "status", "tinyhost-system", "no"},
			{"create", "tinymodules.operator.tinysystems.io", "", "default", "no"},
			{"get", "secrets", "", "tinyhost-system", "no"},
		} {
			args := []string{"auth", "can-i", tt.verb, tt.resource, as, "--subresource=" + tt.sub}
			if tt.ns != "" {
				args = append(args, "-n", tt.ns)
			}
			// kubectl auth can-i exits 1 for "no", and warns first that
			// TinyHosts have no namespace.
			out, _ := env.Kubectl(ctx, args...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			assert.Equal(t, tt.want, lines[len(lines)-1], "%s %s %s in %q", tt.verb, tt.resource, tt.sub, tt.ns)
		}
	})

	t.Run("the operator's RBAC covers Services, EndpointSlices, Events, the hosts' Leases and reading Secrets", func(t *testing.T) {
		as := "--as=system:serviceaccount:tinyhost-system:tinyhost-operator"
		for _, tt := range []struct {
			verb, resource, ns, want string
		}{
			{"create", "services", "apps", "yes"},
			{"update", "services", "apps", "yes"},
			{"delete", "services", "apps", "no"},
			{"create", "endpointslices.discovery.k8s.io", "apps", "yes"},
			{"delete", "endpointslices.discovery.k8s.io", "apps", "yes"},
			{"create", "events.events.k8s.io", "apps", "yes"},
			{"watch", "leases.coordination.k8s.io", "tinyhost-system", "yes"},
			{"watch", "leases.coordination.k8s.io", "kube-system", "no"},
			{"update", "leases.coordination.k8s.io", "tinyhost-system", "yes"}, // its own leader election Lease
			// The Secrets modules name: read, watched by metadata; never written.
			{"get", "secrets", "apps", "yes"},
			{"watch", "secrets", "apps", "yes"},
			{"update", "secrets", "apps", "no"},
			{"create", "secrets", "apps", "no"},
			{"delete", "secrets", "apps", "no"},
		} {
			out, _ := env.Kubectl(ctx, "auth", "can-i", tt.verb, tt.resource, as, "-n", tt.ns)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			assert.Equal(t, tt.want, lines[len(lines)-1], "%s %s in %s", tt.verb, tt.resource, tt.ns)
		}
	})

	t.Run("printer columns and kubectl wait", func(t *testing.T) {
		m := &v1alpha1.TinyModule{}
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: "tinysystems", Name: "common-module-v1"}, m))
		m.Status = v1alpha1.TinyModuleStatus{
			Address:  "10.0.12.7:50051",
			Version:  "1.0.0",
			State:    v1alpha1.StateReady,
			Replicas: 1, ReadyReplicas: 1,
			Components: []v1alpha1.ComponentStatus{
				{Name: "router", Info: v1alpha1.ComponentInfo{Description: "Routes messages based on conditions", Tags: []string{"routing", "conditional"}}},
			},
			Placements:         []v1alpha1.Placement{{Host: "edge-1", Address: "10.0.12.7:50051", Phase: v1alpha1.PhaseReady}},
			ObservedGeneration: m.Generation,
		}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Loaded", ObservedGeneration: m.Generation,
		})
		require.NoError(t, env.Client.Status().Update(ctx, m))

		_, err := env.Kubectl(ctx, "-n", "tinysystems", "wait", "--for=condition=Ready", "--timeout=10s", "tinymodule/common-module-v1")
		require.NoError(t, err)

		out, err := env.Kubectl(ctx, "get", "tinymodules", "-A")
		require.NoError(t, err)
		assert.Equal(t, []string{"NAMESPACE", "NAME", "READY", "VERSION", "ADDRESS", "AGE"}, strings.Fields(firstLine(out)))
		assert.Regexp(t, `tinysystems\s+common-module-v1\s+True\s+1\.0\.0\s+10\.0\.12\.7:50051\s`, out)
		out, err = env.Kubectl(ctx, "get", "tm", "-n", "tinysystems", "-o", "wide")
		require.NoError(t, err)
		assert.Equal(t, []string{"NAME", "READY", "VERSION", "ADDRESS", "AGE", "STATE", "REPLICAS", "AVAILABLE", "UPDATED", "IMAGE", "DEAD-LETTERS", "PROVIDED-BY"}, strings.Fields(firstLine(out)))

		h := &v1alpha1.TinyHost{}
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Name: "edge-1"}, h))
		h.Status.Allocated = &v1alpha1.HostResources{Modules: ptr(int32(3))}
		meta.SetStatusCondition(&h.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionHostReady, Status: metav1.ConditionTrue, Reason: "Probed"})
		require.NoError(t, env.Client.Status().Update(ctx, h))
		out, err = env.Kubectl(ctx, "get", "tinyhosts")
		require.NoError(t, err)
		assert.Equal(t, []string{"NAME", "READY", "ADDRESS", "MODULES", "AGE"}, strings.Fields(firstLine(out)))
		assert.Regexp(t, `edge-1\s+True\s+10\.0\.12\.7:50051\s+3\s`, out)

		// The status of the Tiny Systems module, read back in its shape there.
		out, err = env.Kubectl(ctx, "-n", "tinysystems", "get", "tinymodule", "common-module-v1", "-o", "jsonpath={.status.components}")
		require.NoError(t, err)
		assert.JSONEq(t, `[{"name":"router","info":{"description":"Routes messages based on conditions","tags":["routing","conditional"]}}]`, out)
	})

	t.Run("kubectl scale sets spec.replicas", func(t *testing.T) {
		_, err := env.Kubectl(ctx, "-n", "tinysystems", "scale", "tinymodule/hello", "--replicas=3")
		require.NoError(t, err)
		var m v1alpha1.TinyModule
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: "tinysystems", Name: "hello"}, &m))
		assert.Equal(t, int32(3), *m.Spec.Replicas)
	})

	t.Run("a bad spec is refused with a message that says what is wrong", func(t *testing.T) {
		tests := []struct {
			name string
			yaml string // the object; kind TinyHost when it has spec.address
			want string
		}{
			{"replicas below zero", `spec: {image: r/m:v1, replicas: -1}`, "should be greater than or equal to 0"},
			{"no image and no source", `spec: {replicas: 1}`, "spec.image or spec.source is required"},
			{"an empty image", `spec: {image: ""}`, "should be at least 1 chars long"},
			{"image and source", `spec: {image: r/m:v1, source: {url: "https://a.test/m.wasm", sha256: ` + sha + `}}`, "spec.image and spec.source are mutually exclusive"},
			{"a source without sha256", `spec: {source: {url: "https://a.test/m.wasm"}}`, "spec.source.sha256: Required value"},
			{"a short sha256", `spec: {source: {url: "https://a.test/m.wasm", sha256: abc}}`, "source.sha256 must be 64 lower-case hex digits"},
			{"a plain http url", `spec: {source: {url: "http://a.test/m.wasm", sha256: ` + sha + `}}`, "source.url must be an https URL"},
			{"a mapping that matches nothing", `spec: {image: r/m:v1, hostMappings: [{image: r/m:v2}]}`, "set at least one"},
			{"a mapping with hostVersion and hostVersionRegexp", `spec: {image: r/m:v1, hostMappings: [{hostVersion: "1", hostVersionRegexp: "^1"}]}`, "hostVersion and hostVersionRegexp are mutually exclusive"},
			{"no artifact in a mapping nor in the module", `spec: {hostMappings: [{abi: 1, image: r/m:v1}, {abi: 2}]}`, "spec.image or spec.source is required (or an image or source in every host mapping)"},
			{"minInstances above maxInstances", `spec: {image: r/m:v1, limits: {minInstances: 5, maxInstances: 2}}`, "limits.minInstances must not exceed limits.maxInstances"},
			{"a duration that is not one", `spec: {image: r/m:v1, limits: {callTimeout: "2 seconds"}}`, "spec.limits.callTimeout in body should match"},
			{"a selector In without values", `spec: {image: r/m:v1, hostSelector: {matchExpressions: [{key: tier, operator: In}]}}`, "hostSelector: In and NotIn need at least one value"},
			{"a selector with an unknown operator", `spec: {image: r/m:v1, hostSelector: {matchExpressions: [{key: tier, operator: Near, values: [a]}]}}`, "hostSelector: operator must be one of In, NotIn, Exists, DoesNotExist"},
			{"config that is not an object", `spec: {image: r/m:v1, config: 5}`, "spec.config: Invalid value: \"integer\": spec.config in body must be of type object"},
			{"a wire from a module address", `spec: {image: r/m:v1, wiring: [{from: m/c/p, to: m/c/p}]}`, "wiring.from must be component/port"},
			{"a wire to a port without its module", `spec: {image: r/m:v1, wiring: [{from: c/p, to: c/p}]}`, "wiring.to must be module/component/port"},
			{"a name that is not a module name", `metadata: {name: 9lives}
spec: {image: r/m:v1}`, "metadata.name is the module's name on hosts"},
			{"a module name the host refuses", `metadata: {name: "a` + strings.Repeat("b", 63) + `"}
spec: {image: r/m:v1}`, "be at most 63 characters"},
			// What the host refuses in SetWiring, refused here for its
			// author alone rather than by every host for every tenant.
			{"a wire from a system port", `spec: {image: r/m:v1, wiring: [{from: c/_tick, to: m/c/in}]}`, "spec.wiring[0].from: Invalid value: \"c/_tick\": wiring.from must be component/port"},
			{"a wire to a system port", `spec: {image: r/m:v1, wiring: [{from: c/out, to: other/sink/_settings}]}`, "spec.wiring[0].to: Invalid value: \"other/sink/_settings\": wiring.to must be module/component/port"},
			{"a wire with an unknown delivery", `spec: {image: r/m:v1, wiring: [{from: c/out, to: m/c/in, delivery: exactly-once}]}`, `spec.wiring[0].delivery: Unsupported value: "exactly-once": supported values: "at-most-once", "at-least-once"`},
			{"a wire to a 64-byte port name", `spec: {image: r/m:v1, wiring: [{from: c/out, to: "m/c/` + strings.Repeat("p", 64) + `"}]}`, "system ports (starting with '_') cannot be wired"},
			{"a wire from a 64-byte component name", `spec: {image: r/m:v1, wiring: [{from: "` + strings.Repeat("c", 64) + `/out", to: m/c/in}]}`, "spec.wiring[0].from"},
			{"a wire to an upper-case module", `spec: {image: r/m:v1, wiring: [{from: c/out, to: Other/c/in}]}`, "spec.wiring[0].to"},
			{"a wire with an empty name", `spec: {image: r/m:v1, wiring: [{from: c/out, to: m//in}]}`, "spec.wiring[0].to"},
			{"the second wire bad", `spec: {image: r/m:v1, wiring: [{from: c/out, to: m/c/in}, {from: c/out, to: m/c/in/x}]}`, "spec.wiring[1].to"},
			{"a capability the host does not know", `spec: {image: r/m:v1, capabilities: [log, network]}`, `spec.capabilities[1]: Invalid value: "network": a capability is log, config, timer, messaging, messaging:<module>, messaging:<module>/<component>`},
			{"a messaging grant without a target", `spec: {image: r/m:v1, capabilities: ["messaging:"]}`, `spec.capabilities[0]: Invalid value: "messaging:": a capability is`},
			{"a messaging grant to an upper-case module", `spec: {image: r/m:v1, capabilities: ["messaging:Billing"]}`, `spec.capabilities[0]: Invalid value: "messaging:Billing": a capability is`},
			{"a messaging grant to a port", `spec: {image: r/m:v1, capabilities: ["messaging:a/b/in"]}`, `spec.capabilities[0]: Invalid value: "messaging:a/b/in": a capability is`},
			{"a messaging grant to an empty component", `spec: {image: r/m:v1, capabilities: ["messaging:a/"]}`, `spec.capabilities[0]: Invalid value: "messaging:a/": a capability is`},
			{"a messaging grant to a system port's name", `spec: {image: r/m:v1, capabilities: ["messaging:a/_tick"]}`, `spec.capabilities[0]: Invalid value: "messaging:a/_tick": a capability is`},
			{"a messaging grant to a 64-byte module", `spec: {image: r/m:v1, capabilities: ["messaging:` + strings.Repeat("m", 64) + `"]}`, `spec.capabilities[0]: Invalid value: "messaging:mmmm`},
			{"a target on log", `spec: {image: r/m:v1, capabilities: ["log:a"]}`, `spec.capabilities[0]: Invalid value: "log:a": a capability is`},
			{"a component name too long", `spec: {image: r/m:v1, capabilities: ["messaging:` + strings.Repeat("m", 63) + "/" + strings.Repeat("c", 64) + `"]}`, `spec.capabilities[0]: Invalid value: "messaging:mmm`},
			{"a grant too long for any host", `spec: {image: r/m:v1, capabilities: ["http:` + strings.Repeat("h", 266) + `"]}`, `spec.capabilities[0]: Too long: may not be more than 270 bytes`},
			{"an http grant without a host", `spec: {image: r/m:v1, capabilities: [http]}`, `spec.capabilities[0]: Invalid value: "http": a capability is`},
			{"an http grant of a URL", `spec: {image: r/m:v1, capabilities: ["http:https://api.example.com"]}`, `Invalid value: "http:https://api.example.com": a capability is`},
			{"an http grant in upper case", `spec: {image: r/m:v1, capabilities: ["http:API.example.com"]}`, `Invalid value: "http:API.example.com": a capability is`},
			{"an http grant of every host", `spec: {image: r/m:v1, capabilities: ["http:*"]}`, `Invalid value: "http:*": a capability is`},
			{"a secret grant without a name", `spec: {image: r/m:v1, capabilities: ["secret:"]}`, `Invalid value: "secret:": a capability is`},
			{"a secret grant of a path", `spec: {image: r/m:v1, capabilities: ["secret:../token"]}`, `Invalid value: "secret:../token": a capability is`},
			{"a kv grant naming a bucket", `spec: {image: r/m:v1, capabilities: ["kv:other"]}`, `Invalid value: "kv:other": a capability is`},
			{"a kv key bound past the ABI's", `spec: {image: r/m:v1, limits: {kvMaxKeyBytes: 1025}}`, `spec.limits.kvMaxKeyBytes`},
			{"a kv quota of nothing", `spec: {image: r/m:v1, limits: {kvMaxBytes: 0}}`, `spec.limits.kvMaxBytes`},
			{"an empty list", `spec: {image: r/m:v1, capabilities: []}`, `capabilities: [] is ambiguous: omit the field for the host's default capabilities, or write [none] for no capability`},
			{"none with another", `spec: {image: r/m:v1, capabilities: [none, log]}`, "capabilities: none goes alone"},
			{"a capability twice", `spec: {image: r/m:v1, capabilities: [log, log]}`, `spec.capabilities[1]: Duplicate value: "log"`},
			{"a provided module that names an image", `spec: {providedBy: h1, image: r/m:v1}`, "a module provided by a host names no artifact"},
			{"a provided module with host mappings", `spec: {providedBy: h1, hostMappings: [{abi: 1, image: r/m:v1}]}`, "spec.image, spec.source and spec.hostMappings must be empty with spec.providedBy"},
			{"every host and replicas", `spec: {image: r/m:v1, replicas: 2, placement: {mode: EveryHost}}`, "spec.replicas and spec.placement.mode EveryHost conflict"},
			{"an unknown placement mode", `spec: {image: r/m:v1, placement: {mode: Somewhere}}`, `spec.placement.mode: Unsupported value: "Somewhere"`},
			{"a provided module with a placement", `spec: {providedBy: h1, placement: {mode: EveryHost}}`, "spec.placement must be empty with spec.providedBy"},
			{"a negative maxSurge", `spec: {image: r/m:v1, strategy: {maxSurge: -1}}`, "maxSurge must be a number >= 0 or a percentage"},
			{"a maxUnavailable that is neither", `spec: {image: r/m:v1, strategy: {maxUnavailable: "half"}}`, "maxUnavailable must be a number >= 0 or a percentage"},
			{"a secret not granted", `spec: {image: r/m:v1, capabilities: [log], secrets: [{name: token, secretKeyRef: {name: api, key: token}}]}`, "every spec.secrets name must be granted in spec.capabilities as secret:<name>"},
			{"secrets without capabilities", `spec: {image: r/m:v1, secrets: [{name: token, secretKeyRef: {name: api, key: token}}]}`, "every spec.secrets name must be granted"},
			{"a secret name the host refuses", `spec: {image: r/m:v1, capabilities: ["secret:token"], secrets: [{name: "../token", secretKeyRef: {name: api, key: token}}]}`, "secrets.name is a secret name of a host"},
			{"a Secret name that is not one", `spec: {image: r/m:v1, capabilities: ["secret:token"], secrets: [{name: token, secretKeyRef: {name: "Api/x", key: token}}]}`, "secretKeyRef.name must be a Secret's name"},
			{"a key that is not one", `spec: {image: r/m:v1, capabilities: ["secret:token"], secrets: [{name: token, secretKeyRef: {name: api, key: "a/b"}}]}`, "secretKeyRef.key must be a Secret's key"},
			{"a secret named twice", `spec: {image: r/m:v1, capabilities: ["secret:token"], secrets: [{name: token, secretKeyRef: {name: a, key: k}}, {name: token, secretKeyRef: {name: b, key: k}}]}`, `spec.secrets[1]: Duplicate value`},
			{"a provided module with secrets", `spec: {providedBy: h1, capabilities: ["secret:token"], secrets: [{name: token, secretKeyRef: {name: api, key: token}}]}`, "spec.secrets must be empty with spec.providedBy"},
			{"a host address without a port", `spec: {address: host.example}`, "address must be host:port"},
			{"a host with negative capacity", `spec: {address: "h:1", capacity: {modules: -1}}`, "spec.capacity.modules in body should be greater than or equal to 0"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := create(ctx, env, tt.yaml)
				require.Error(t, err)
				assert.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
				assert.Contains(t, err.Error(), tt.want)
			})
		}
	})

	t.Run("kubectl apply refuses a bad spec and says why", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		require.NoError(t, os.WriteFile(bad, []byte(`apiVersion: operator.tinysystems.io/v1alpha1
kind: TinyModule
metadata: {name: bad, namespace: default}
spec: {replicas: -1}
`), 0o600))
		out, err := env.Kubectl(ctx, "apply", "-f", bad)
		require.Error(t, err)
		t.Logf("kubectl apply said:\n%s", out)
		assert.Contains(t, out, "spec.replicas in body should be greater than or equal to 0")
		assert.Contains(t, out, "spec.image or spec.source is required")
	})

	t.Run("good specs are accepted", func(t *testing.T) {
		for _, y := range []string{
			`spec: {image: r/m:v1, replicas: 0}`,
			`spec: {hostMappings: [{abi: 1, image: r/m:abi1}, {hostVersionRegexp: "^0\\.", source: {url: "https://a.test/m.wasm", sha256: ` + sha + `}}]}`,
			`spec: {image: r/m:v1, hostSelector: {matchExpressions: [{key: tier, operator: Exists}, {key: zone, operator: In, values: [a, b]}]}}`,
			`spec: {image: r/m:v1, limits: {callTimeout: 1h30m, queueTimeout: 250ms}, wiring: [{from: split/out, to: other/sink/in}, {from: a.b_c-d/x_y, to: m-1.v2/c_1/in-2}]}`,
			`spec: {image: r/m:v1, capabilities: [log, config, timer, messaging]}`,
			`spec: {image: r/m:v1, capabilities: [kv], limits: {kvMaxKeyBytes: 1024, kvMaxValueBytes: 524288, kvMaxBytes: 68719476736, kvMaxListKeys: 10000}}`,
			`spec: {image: r/m:v1, capabilities: ["messaging:a", "messaging:b.c-d_e/x_1", "messaging:` + strings.Repeat("m", 63) + "/" + strings.Repeat("c", 63) + `"]}`,
			`spec: {image: r/m:v1, capabilities: [none]}`,
			`spec: {image: r/m:v1, capabilities: [log, "http:api.example.com", "http:*.example.org:8443", "http:10.0.0.7:8080", "secret:api-token"]}`,
			`spec: {image: r/m:v1, capabilities: ["secret:api-token", "secret:db"], secrets: [{name: api-token, secretKeyRef: {name: api, key: token}}, {name: db, secretKeyRef: {name: db.creds, key: PASS_word-1}}]}`,
			`spec: {image: r/m:v1, placement: {mode: EveryHost}, hostSelector: {matchLabels: {tier: edge}}}`,
			`spec: {image: r/m:v1, replicas: 3, placement: {mode: Replicas}, strategy: {maxSurge: 25%, maxUnavailable: 1}}`,
			`metadata: {name: "abbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
spec: {image: r/m:v1}`,
			`spec: {address: "[::1]:50051", unschedulable: true, capacity: {modules: 0, memory: 512Mi}}`,
			`spec: {providedBy: h1}`,
		} {
			assert.NoError(t, create(ctx, env, y), y)
		}
	})

	t.Run("examples/k8s/quote.yaml applies: a Secret and a TinyModule that names it", func(t *testing.T) {
		_, err := env.Kubectl(ctx, "create", "namespace", "tinysystems")
		if err != nil {
			// Made by the samples already.
			_, err = env.Kubectl(ctx, "get", "namespace", "tinysystems")
		}
		require.NoError(t, err)
		out, err := env.Kubectl(ctx, "apply", "-f", "examples/k8s/quote.yaml")
		require.NoError(t, err, out)
		var m v1alpha1.TinyModule
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: "tinysystems", Name: "quote"}, &m))
		require.Len(t, m.Spec.Secrets, 1)
		assert.Equal(t, v1alpha1.SecretKeySelector{Name: "quotes-api", Key: "key"}, m.Spec.Secrets[0].SecretKeyRef)
	})

	t.Run("no capabilities is [none], and omitted stays omitted", func(t *testing.T) { capabilitiesKept(ctx, t, env) })

	t.Run("spec.providedBy is immutable", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			before string
			change func(m *v1alpha1.TinyModule)
		}{
			{"another host", `spec: {providedBy: h1}`, func(m *v1alpha1.TinyModule) { m.Spec.ProvidedBy = "h2" }},
			{"taken away", `spec: {providedBy: h1}`, func(m *v1alpha1.TinyModule) { m.Spec.ProvidedBy, m.Spec.Image = "", "r/m:v1" }},
			{"set later", `spec: {image: r/m:v1}`, func(m *v1alpha1.TinyModule) { m.Spec.ProvidedBy, m.Spec.Image = "h1", "" }},
		} {
			t.Run(tt.name, func(t *testing.T) {
				name := "provided-" + strings.ReplaceAll(tt.name, " ", "-")
				require.NoError(t, create(ctx, env, "metadata: {name: "+name+"}\n"+tt.before))
				var m v1alpha1.TinyModule
				require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, &m))
				tt.change(&m)
				err := env.Client.Update(ctx, &m)
				require.Error(t, err)
				assert.Contains(t, err.Error(), "spec.providedBy is immutable")
			})
		}
	})
}

const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// create creates a TinyModule, or a TinyHost when the spec has an address,
// from YAML sent as it is, the way kubectl sends it. Without a name it gets
// a generated one.
// capabilitiesKept: [none] and an omitted list read back as written, and
// stay so through an update with the Go types (the operator's own adds a
// finalizer), which drop an empty list.
func capabilitiesKept(ctx context.Context, t *testing.T, env *kubetest.Env) {
	for _, tc := range []struct {
		name, yaml string
		want       []v1alpha1.Capability
	}{
		{"caps-omitted", `spec: {image: r/m:v1}`, nil},
		{"caps-none", `spec: {image: r/m:v1, capabilities: [none]}`, []v1alpha1.Capability{v1alpha1.CapabilityNone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, create(ctx, env, "metadata: {name: "+tc.name+"}\n"+tc.yaml))
			var m v1alpha1.TinyModule
			key := types.NamespacedName{Namespace: "default", Name: tc.name}
			require.NoError(t, env.Client.Get(ctx, key, &m))
			assert.Equal(t, tc.want, m.Spec.Capabilities)
			// An update through the Go types, as the operator's own
			// (a finalizer), keeps what was written.
			m.Finalizers = append(m.Finalizers, "test/keep")
			require.NoError(t, env.Client.Update(ctx, &m))
			require.NoError(t, env.Client.Get(ctx, key, &m))
			assert.Equal(t, tc.want, m.Spec.Capabilities)
			m.Finalizers = nil
			require.NoError(t, env.Client.Update(ctx, &m))
		})
	}
}

func create(ctx context.Context, env *kubetest.Env, y string) error {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(y), &obj); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	if _, isHost, _ := unstructured.NestedFieldNoCopy(obj, "spec", "address"); isHost {
		u.SetKind("TinyHost")
	} else {
		u.SetKind("TinyModule")
		u.SetNamespace("default")
	}
	if u.GetName() == "" {
		u.SetGenerateName("t-")
	}
	return env.Client.Create(ctx, u)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func ptr[T any](v T) *T { return &v }
