package k8s_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/tinyhost/tinyhost/internal/e2e"
)

// The Secrets the manifests mount (kubernetes.io/tls: ca.crt, tls.crt,
// tls.key), and the one of tinyctl's invoke certificate.
const (
	hostSecret     = "tinyhost-host-tls"
	operatorSecret = "tinyhost-operator-tls"
	clientSecret   = "tinyhost-client-tls"
)

// certificate is what the test reads of a cert-manager Certificate.
type certificate struct {
	Kind string `json:"kind"`
	Spec struct {
		SecretName string   `json:"secretName"`
		CommonName string   `json:"commonName"`
		DNSNames   []string `json:"dnsNames"`
		IsCA       bool     `json:"isCA"`
		Subject    struct {
			Organizations []string `json:"organizations"`
		} `json:"subject"`
		Usages []string `json:"usages"`
	} `json:"spec"`
}

// creds are the Secrets of the manifests, each a directory holding its
// keys as files: the Secret as a pod mounts it.
type creds struct{ host, operator, client string }

// hostArgs are the TLS flags of host-pods.yaml.
func (c creds) hostArgs() []string {
	return []string{"--tls-cert=" + filepath.Join(c.host, "tls.crt"), "--tls-key=" + filepath.Join(c.host, "tls.key"),
		"--tls-client-ca=" + filepath.Join(c.host, "ca.crt"), "--peer-tls-ca=" + filepath.Join(c.host, "ca.crt")}
}

// operatorArgs are the host TLS flags of config/manager's Deployment.
func (c creds) operatorArgs() []string {
	return []string{"--host-tls-ca=" + filepath.Join(c.operator, "ca.crt"),
		"--host-tls-cert=" + filepath.Join(c.operator, "tls.crt"), "--host-tls-key=" + filepath.Join(c.operator, "tls.key")}
}

// tinyctl is tinyctl's environment for the invoke certificate.
func (c creds) tinyctl() []string {
	return []string{
		"TINYCTL_TLS_CA=" + filepath.Join(c.client, "ca.crt"),
		"TINYCTL_TLS_CERT=" + filepath.Join(c.client, "tls.crt"),
		"TINYCTL_TLS_KEY=" + filepath.Join(c.client, "tls.key"),
	}
}

// secrets issues the certificates operator/config/certmanager asks
// cert-manager for (organizations, usages, DNS names), with ip added to
// the server certificates (the test's hosts advertise it, not the pods'
// DNS names), and makes each Secret as operator/README.md says to without
// cert-manager.
func secrets(t *testing.T, cp *controlPlane, ip string) creds {
	t.Helper()
	ca := e2e.NewCA(t, "tinyhost CA")
	out := cp.kubectl(t, "kustomize", "operator/config/certmanager")
	mounted := map[string]string{}
	for doc := range strings.SplitSeq(out, "\n---\n") {
		var c certificate
		require.NoError(t, yaml.Unmarshal([]byte(doc), &c))
		if c.Kind != "Certificate" || c.Spec.IsCA {
			continue
		}
		leaf := e2e.Leaf{
			Name: c.Spec.CommonName, Organizations: c.Spec.Subject.Organizations, DNSNames: c.Spec.DNSNames,
			Server: slices.Contains(c.Spec.Usages, "server auth"), Client: slices.Contains(c.Spec.Usages, "client auth"),
		}
		if leaf.Server {
			leaf.IPs = []string{ip}
		}
		cert, key := ca.Issue(t, leaf)
		out := cp.kubectl(t, "create", "secret", "generic", c.Spec.SecretName, "-n", hostNamespace, "--type=kubernetes.io/tls",
			"--from-file=ca.crt="+ca.File, "--from-file=tls.crt="+cert, "--from-file=tls.key="+key)
		t.Logf("kubectl create secret generic %s --type=kubernetes.io/tls (%s, O=%v, DNS %v, IP %v):\n%s",
			c.Spec.SecretName, c.Spec.CommonName, leaf.Organizations, leaf.DNSNames, leaf.IPs, out)
		mounted[c.Spec.SecretName] = mount(t, cp, c.Spec.SecretName)
	}
	for _, name := range []string{hostSecret, operatorSecret, clientSecret} {
		require.Contains(t, mounted, name, "operator/config/certmanager makes no Secret %s", name)
	}
	return creds{host: mounted[hostSecret], operator: mounted[operatorSecret], client: mounted[clientSecret]}
}

// mount writes the keys of the Secret into a directory, one file each,
// read with the kubectl command examples/k8s/README.md gives.
func mount(t *testing.T, cp *controlPlane, name string) string {
	t.Helper()
	assert.Equal(t, string(corev1.SecretTypeTLS), cp.kubectl(t, "get", "secret", name, "-n", hostNamespace, "-o", "jsonpath={.type}"))
	dir := t.TempDir()
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		v := cp.kubectl(t, "get", "secret", name, "-n", hostNamespace, "-o", `go-template={{index .data "`+k+`" | base64decode}}`)
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600))
	}
	return dir
}

// podNameVerifies checks that the hosts' certificate is valid for the
// address the pods of host-pods.yaml advertise, with the pod's name in
// place of $(POD_NAME).
func podNameVerifies(t *testing.T, manifest, hostCerts string) {
	t.Helper()
	b, err := os.ReadFile(manifest)
	require.NoError(t, err)
	var advertise string
	for doc := range strings.SplitSeq(string(b), "\n---\n") {
		var sts appsv1.StatefulSet
		require.NoError(t, yaml.Unmarshal([]byte(doc), &sts))
		if sts.Kind != "StatefulSet" {
			continue
		}
		for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "TINYHOST_ADVERTISE_ADDRESS" {
				advertise = e.Value
			}
		}
	}
	host, _, ok := strings.Cut(strings.ReplaceAll(advertise, "$(POD_NAME)", "tinyhost-0"), ":")
	require.True(t, ok, "TINYHOST_ADVERTISE_ADDRESS %q of host-pods.yaml", advertise)
	pemBytes, err := os.ReadFile(filepath.Join(hostCerts, "tls.crt"))
	require.NoError(t, err)
	block, _ := pem.Decode(pemBytes)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.NoError(t, cert.VerifyHostname(host), "the pods' address %s", host)
}
