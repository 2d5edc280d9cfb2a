// Package tinyhost holds the tests of the Helm chart beside them: lint,
// rendering with default and other values, the same objects as
// operator/config, and a server-side dry-run of the rendering against a
// real kube-apiserver.
package tinyhost

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

// kubeVersion is the envtest apiserver's, which the dry-run runs against.
const kubeVersion = "v1.36.3"

// otherValues change every value the chart has.
var otherValues = map[string]any{
	"image":           map[string]any{"registry": "registry.example/platform/", "tag": "v1.2.3"},
	"operator":        map[string]any{"replicas": 2, "resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "128Mi"}}},
	"admissionPolicy": map[string]any{"enabled": false},
	"host":            map[string]any{"enabled": true, "replicas": 5, "stateReplicas": 5},
	"certManager":     map[string]any{"enabled": true},
	"nats": map[string]any{"replicas": 5, "image": "registry.example/mirror/nats:2.15.2",
		"storage":   map[string]any{"size": "50Gi", "storageClassName": "fast"},
		"resources": map[string]any{"requests": map[string]any{"cpu": "1", "memory": "2Gi"}, "limits": map[string]any{"memory": "4Gi"}}},
}

// externalNATS has the hosts keep their state on a NATS of the user's,
// with TLS and credentials from a Secret.
var externalNATS = map[string]any{
	"host": map[string]any{"enabled": true},
	"nats": map[string]any{"external": map[string]any{"url": "tls://nats.example:4222", "secretName": "nats-client",
		"ca": true, "clientCert": true, "creds": true}},
}

// allOn turns on the optional parts and keeps the rest as it is.
var allOn = map[string]any{
	"host":        map[string]any{"enabled": true},
	"certManager": map[string]any{"enabled": true},
}

func chartDir() string { return filepath.Join(kubetest.Root(), "charts", "tinyhost") }

// render is `helm template tinyhost charts/tinyhost --namespace ns
// [--include-crds]` with vals.
func render(t *testing.T, ns string, vals map[string]any, crds bool) string {
	t.Helper()
	m, err := renderErr(t, ns, vals, crds)
	require.NoError(t, err)
	return m
}

// renderErr is render that returns the chart's error.
func renderErr(t *testing.T, ns string, vals map[string]any, crds bool) (string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir())
	require.NoError(t, err)
	kv, err := common.ParseKubeVersion(kubeVersion)
	require.NoError(t, err)
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = "tinyhost"
	inst.Namespace = ns
	inst.Replace = true
	inst.IncludeCRDs = crds
	inst.KubeVersion = kv
	rel, err := inst.RunWithContext(t.Context(), ch, vals)
	if err != nil {
		return "", err
	}
	r, ok := rel.(*release.Release)
	require.True(t, ok, "release of type %T", rel)
	return strings.TrimSpace(r.Manifest) + "\n", nil
}

// objects decodes a multi-document YAML stream as the apiserver's clients
// do (numbers as int64), leaving out empty documents.
func objects(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		j, err := yaml.YAMLToJSON(doc)
		require.NoError(t, err)
		if string(j) == "null" {
			continue
		}
		o := &unstructured.Unstructured{}
		require.NoError(t, o.UnmarshalJSON(j), "%s", doc)
		out = append(out, o)
	}
}

func key(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// byKey indexes objects as they are compared: without the namespace of a
// cluster-scoped object (kustomize sets one on the admission policy, which
// it does not know to be cluster-scoped; the apiserver ignores it).
func byKey(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	clusterScoped := map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
		"CustomResourceDefinition": true, "MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true}
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if clusterScoped[o.GetKind()] {
			o.SetNamespace("")
		}
		require.NotContains(t, m, key(o), "two objects %s", key(o))
		m[key(o)] = o
	}
	return m
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestLint: `helm lint --strict` finds nothing, with the defaults and with
// every value changed.
func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{"defaults": nil, "other values": otherValues} {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict = true
			l.Namespace = "tinyhost-system"
			kv, err := common.ParseKubeVersion(kubeVersion)
			require.NoError(t, err)
			l.KubeVersion = kv
			res := l.Run([]string{chartDir()}, vals)
			require.Empty(t, res.Errors)
			for _, m := range res.Messages {
				assert.Less(t, m.Severity, support.WarningSev, "lint: %s", m)
			}
			t.Logf("helm lint --strict: %d chart linted, %d errors, messages: %v", res.TotalChartsLinted, len(res.Errors), res.Messages)
		})
	}
}

// TestTemplate: what the values change in the rendering, and what the
// defaults leave out.
func TestTemplate(t *testing.T) {
	t.Run("defaults: the operator at the chart's appVersion, no hosts, no cert-manager", func(t *testing.T) {
		m := byKey(t, objects(t, render(t, "tinyhost-system", nil, false)))
		t.Logf("rendered: %s", strings.Join(keys(m), ", "))
		dep := m["Deployment tinyhost-system/tinyhost-operator"]
		require.NotNil(t, dep)
		c := container(t, dep)
		assert.Equal(t, "tinyhost-operator:dev", c["image"])
		assert.NotContains(t, fmt.Sprint(c["args"]), "--host-lease-namespace")
		assert.Contains(t, m, "MutatingAdmissionPolicy /tinymodule-unload.operator.tinysystems.io")
		assert.NotContains(t, m, "StatefulSet tinyhost-system/tinyhost")
		assert.NotContains(t, m, "StatefulSet tinyhost-system/tinyhost-nats")
		assert.NotContains(t, m, "Certificate tinyhost-system/tinyhost-host")
	})

	t.Run("hosts: on the release's three NATS servers, each bucket replicated three times", func(t *testing.T) {
		m := byKey(t, objects(t, render(t, "tinyhost-system", map[string]any{"host": map[string]any{"enabled": true}}, false)))
		args := container(t, m["StatefulSet tinyhost-system/tinyhost"])["args"]
		assert.Contains(t, args, "--nats-url=nats://tinyhost-nats:4222")
		assert.Contains(t, args, "--state-replicas=3")
		sts := m["StatefulSet tinyhost-system/tinyhost-nats"]
		require.NotNil(t, sts)
		replicas, _, _ := unstructured.NestedInt64(sts.Object, "spec", "replicas")
		assert.EqualValues(t, 3, replicas)
		assert.Equal(t, "nats:"+strings.TrimPrefix(natsServerVersion(t), "v"), container(t, sts)["image"],
			"the NATS image is the nats-server of go.mod, the one the host embeds")
		assert.Equal(t, 3, strings.Count(natsConf(t, m, "tinyhost-system"), ".tinyhost-nats-headless:6222"), "routes to each server")
		assert.Contains(t, m, "Service tinyhost-system/tinyhost-nats")
		assert.Contains(t, m, "Service tinyhost-system/tinyhost-nats-headless")
		assert.Contains(t, m, "PodDisruptionBudget tinyhost-system/tinyhost-nats")
	})

	t.Run("external NATS: no StatefulSet; its URL, CA, client certificate and credentials from the Secret", func(t *testing.T) {
		m := byKey(t, objects(t, render(t, "tinyhost-system", externalNATS, false)))
		assert.NotContains(t, m, "StatefulSet tinyhost-system/tinyhost-nats")
		assert.NotContains(t, m, "ConfigMap tinyhost-system/tinyhost-nats")
		sts := m["StatefulSet tinyhost-system/tinyhost"]
		require.NotNil(t, sts)
		args := container(t, sts)["args"]
		for _, a := range []string{"--nats-url=tls://nats.example:4222", "--nats-ca=/etc/tinyhost/nats/ca.crt",
			"--nats-cert=/etc/tinyhost/nats/tls.crt", "--nats-key=/etc/tinyhost/nats/tls.key",
			"--nats-creds=/etc/tinyhost/nats/nats.creds", "--state-replicas=3"} {
			assert.Contains(t, args, a)
		}
		assert.NotContains(t, args, "--nats-url=nats://tinyhost-nats:4222")
		vols, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "volumes")
		assert.Contains(t, vols, map[string]any{"name": "nats", "secret": map[string]any{"secretName": "nats-client"}})

		// Only the URL: no Secret mounted, no flag of one.
		m = byKey(t, objects(t, render(t, "tinyhost-system", map[string]any{"host": map[string]any{"enabled": true},
			"nats": map[string]any{"external": map[string]any{"url": "nats://nats.example:4222"}}}, false)))
		c := container(t, m["StatefulSet tinyhost-system/tinyhost"])
		assert.Contains(t, c["args"], "--nats-url=nats://nats.example:4222")
		assert.NotContains(t, fmt.Sprint(c["args"]), "/etc/tinyhost/nats")
		assert.NotContains(t, fmt.Sprint(c["volumeMounts"]), "nats")

		// A Secret's file asked for without the Secret's name.
		_, err := renderErr(t, "tinyhost-system", map[string]any{"host": map[string]any{"enabled": true},
			"nats": map[string]any{"external": map[string]any{"url": "tls://nats.example:4222", "ca": true}}}, false)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "nats.external.secretName")
	})

	t.Run("other values: registry, tag, replicas, resources, hosts, cert-manager, no admission policy, another namespace", func(t *testing.T) {
		m := byKey(t, objects(t, render(t, "platform", otherValues, false)))
		dep := m["Deployment platform/tinyhost-operator"]
		require.NotNil(t, dep)
		replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
		assert.EqualValues(t, 2, replicas)
		c := container(t, dep)
		assert.Equal(t, "registry.example/platform/tinyhost-operator:v1.2.3", c["image"])
		assert.Contains(t, c["args"], "--host-lease-namespace=platform")
		assert.Equal(t, map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "128Mi"}, "limits": map[string]any{"memory": "256Mi"}}, c["resources"])
		assert.NotContains(t, m, "MutatingAdmissionPolicy /tinymodule-unload.operator.tinysystems.io")

		sts := m["StatefulSet platform/tinyhost"]
		require.NotNil(t, sts)
		replicas, _, _ = unstructured.NestedInt64(sts.Object, "spec", "replicas")
		assert.EqualValues(t, 5, replicas)
		hc := container(t, sts)
		assert.Equal(t, "registry.example/platform/tinyhost:v1.2.3", hc["image"])
		assert.Contains(t, fmt.Sprint(hc["env"]), "$(POD_NAME).tinyhost.platform.svc:50051")
		lease := m["Role platform/tinyhost-operator"]
		require.NotNil(t, lease, "the operator's Role for the hosts' Leases, in the release's namespace")
		cert := m["Certificate platform/tinyhost-host"]
		require.NotNil(t, cert)
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		assert.Equal(t, []string{"*.tinyhost.platform.svc"}, dns)
		assert.Contains(t, hc["args"], "--state-replicas=5")
		nsts := m["StatefulSet platform/tinyhost-nats"]
		require.NotNil(t, nsts)
		replicas, _, _ = unstructured.NestedInt64(nsts.Object, "spec", "replicas")
		assert.EqualValues(t, 5, replicas)
		nc := container(t, nsts)
		assert.Equal(t, "registry.example/mirror/nats:2.15.2", nc["image"])
		assert.Equal(t, map[string]any{"requests": map[string]any{"cpu": "1", "memory": "2Gi"}, "limits": map[string]any{"memory": "4Gi"}}, nc["resources"])
		assert.Equal(t, 5, strings.Count(natsConf(t, m, "platform"), ".tinyhost-nats-headless:6222"), "routes to each server")
		pvcs, _, _ := unstructured.NestedSlice(nsts.Object, "spec", "volumeClaimTemplates")
		require.Len(t, pvcs, 1)
		class, _, _ := unstructured.NestedString(pvcs[0].(map[string]any), "spec", "storageClassName")
		assert.Equal(t, "fast", class)
		size, _, _ := unstructured.NestedString(pvcs[0].(map[string]any), "spec", "resources", "requests", "storage")
		assert.Equal(t, "50Gi", size)
		for k, o := range m {
			if o.GetNamespace() != "" {
				assert.Equal(t, "platform", o.GetNamespace(), k)
			}
		}
	})
}

// TestNATSConfig: the NATS servers' configuration file, as the chart
// renders it with the defaults and with other values, is one that
// nats-server (go.mod's version, the image's) accepts.
func TestNATSConfig(t *testing.T) {
	exe := e2e.NATSServerBinary(t)
	for name, vals := range map[string]map[string]any{"defaults": allOn, "other values": otherValues} {
		t.Run(name, func(t *testing.T) {
			conf := filepath.Join(t.TempDir(), "nats.conf")
			require.NoError(t, os.WriteFile(conf, []byte(natsConf(t, byKey(t, objects(t, render(t, "ns", vals, false))), "ns")), 0o644))
			res := e2e.Run(t, []string{"POD_NAME=tinyhost-nats-0"}, exe, "--config", conf, "-t")
			require.Equal(t, 0, res.Code, "%s%s", res.Stdout, res.Stderr)
			assert.Contains(t, res.Stdout+res.Stderr, "is valid")
		})
	}
}

// natsConf is the NATS servers' configuration file in the ConfigMap.
func natsConf(t *testing.T, m map[string]*unstructured.Unstructured, ns string) string {
	t.Helper()
	cm := m["ConfigMap "+ns+"/tinyhost-nats"]
	require.NotNil(t, cm)
	conf, _, _ := unstructured.NestedString(cm.Object, "data", "nats.conf")
	return conf
}

// natsServerVersion is the version of nats-server go.mod requires.
func natsServerVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kubetest.Root(), "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/nats-io/nats-server/v2\s+(v\S+)`).FindSubmatch(b)
	require.NotNil(t, m, "nats-server in go.mod")
	return string(m[1])
}

func container(t *testing.T, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.Len(t, cs, 1)
	return cs[0].(map[string]any)
}

// TestChart runs the rendering against the envtest apiserver: the same
// objects as operator/config (built by kubectl kustomize), and a
// server-side dry-run of every object.
func TestChart(t *testing.T) {
	env := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)

	kustomize := func(t *testing.T, dir string) []*unstructured.Unstructured {
		t.Helper()
		out, err := env.Kubectl(ctx, "kustomize", dir)
		require.NoError(t, err)
		return objects(t, out)
	}
	// The chart installs into an existing namespace (helm install
	// --create-namespace, or one of the platform's): config/default's
	// Namespace is the one object it leaves out.
	withoutNamespace := func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() != "Namespace" {
				out = append(out, o)
			}
		}
		return out
	}
	same := func(t *testing.T, want, got map[string]*unstructured.Unstructured) {
		t.Helper()
		require.Equal(t, keys(want), keys(got), "the objects of operator/config and of the chart")
		for k, w := range want {
			wy, err := yaml.Marshal(w.Object)
			require.NoError(t, err)
			gy, err := yaml.Marshal(got[k].Object)
			require.NoError(t, err)
			assert.Equal(t, string(wy), string(gy), "%s: operator/config (expected) and the chart (actual) differ", k)
		}
	}

	t.Run("defaults render what kubectl kustomize operator/config/default makes", func(t *testing.T) {
		want := byKey(t, withoutNamespace(kustomize(t, "operator/config/default")))
		got := byKey(t, objects(t, render(t, "tinyhost-system", nil, true)))
		same(t, want, got)
		t.Logf("%d objects, the same in both", len(got))
	})

	t.Run("hosts and cert-manager render config/host, config/certmanager, config/nats and examples/k8s/host-pods.yaml besides", func(t *testing.T) {
		all := withoutNamespace(kustomize(t, "operator/config/default"))
		all = append(all, kustomize(t, "operator/config/host")...)
		all = append(all, kustomize(t, "operator/config/certmanager")...)
		all = append(all, kustomize(t, "operator/config/nats")...)
		pods, err := os.ReadFile(filepath.Join(kubetest.Root(), "examples", "k8s", "host-pods.yaml"))
		require.NoError(t, err)
		all = append(all, objects(t, string(pods))...)
		want := byKey(t, all)
		got := byKey(t, objects(t, render(t, "tinyhost-system", allOn, true)))
		same(t, want, got)
		t.Logf("%d objects, the same in both", len(got))
	})

	// cert-manager is not part of envtest: its two kinds as CRDs that take
	// any spec, so that the dry-run of the Certificates and Issuers checks
	// what the apiserver can (names, namespaces, kinds), not their schema.
	for _, kind := range []string{"Certificate", "Issuer"} {
		plural := strings.ToLower(kind) + "s"
		crd := objects(t, fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.cert-manager.io}
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: %[1]s, listKind: %[1]sList, plural: %[2]s, singular: %[3]s}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, kind, plural, strings.ToLower(kind)))
		require.NoError(t, env.Client.Create(ctx, crd[0]))
	}
	for _, ns := range []string{"tinyhost-system", "platform"} {
		require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}

	t.Run("server-side dry-run refuses what the apiserver would", func(t *testing.T) {
		objs := byKey(t, objects(t, render(t, "tinyhost-system", map[string]any{"operator": map[string]any{"replicas": -1}}, false)))
		err := eventuallyApplies(ctx, env.Client, objs["Deployment tinyhost-system/tinyhost-operator"])
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.replicas")
		t.Logf("operator.replicas=-1: %v", err)
	})

	for _, tc := range []struct {
		name, ns string
		vals     map[string]any
	}{
		{"defaults", "tinyhost-system", nil},
		{"hosts and cert-manager", "tinyhost-system", allOn},
		{"other values", "platform", otherValues},
		{"external NATS", "tinyhost-system", externalNATS},
	} {
		t.Run("server-side dry-run: "+tc.name, func(t *testing.T) {
			objs := objects(t, render(t, tc.ns, tc.vals, true))
			for _, o := range objs {
				// Apply, not create: the CRDs and the admission policy
				// are installed already; a dry-run apply checks both
				// the new objects and the changes to those.
				err := eventuallyApplies(ctx, env.Client, o)
				assert.NoError(t, err, "dry-run apply of %s", key(o))
			}
			t.Logf("%d objects accepted by the apiserver (dry-run)", len(objs))
			// Nothing was written.
			var pods unstructured.UnstructuredList
			pods.SetAPIVersion("apps/v1")
			pods.SetKind("DeploymentList")
			require.NoError(t, env.Client.List(ctx, &pods, client.InNamespace(tc.ns)))
			assert.Empty(t, pods.Items)
		})
	}
}

// TestReadme: the chart's README quotes `helm template` of the defaults as
// it is; UPDATE_README=1 rewrites the quote.
func TestReadme(t *testing.T) {
	const begin, end = "<!-- helm template: begin -->\n```yaml\n", "```\n<!-- helm template: end -->"
	path := filepath.Join(chartDir(), "README.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(b)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	require.True(t, i >= 0 && j > i, "README.md has no helm template quote")
	want := render(t, "tinyhost-system", nil, false)
	if os.Getenv("UPDATE_README") == "1" {
		readme = readme[:i+len(begin)] + want + readme[j:]
		require.NoError(t, os.WriteFile(path, []byte(readme), 0o644))
		j = strings.Index(readme, end)
	}
	assert.Equal(t, want, readme[i+len(begin):j], "README.md's helm template is not the chart's: UPDATE_README=1 go test -run TestReadme ./charts/tinyhost")
}

// eventuallyApplies dry-runs a server-side apply of o, retrying while the
// apiserver does not yet serve a kind whose CRD was just created.
func eventuallyApplies(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	for {
		obj := o.DeepCopy()
		err := c.Patch(ctx, obj, client.Apply, client.DryRunAll, client.FieldOwner("chart-test"), client.ForceOwnership) //nolint:staticcheck // Apply with unstructured objects
		if err == nil || !strings.Contains(err.Error(), "no matches for kind") || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
