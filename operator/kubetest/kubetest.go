// Package kubetest starts a real kube-apiserver and etcd for a test, with
// the operator's CRDs installed, through controller-runtime's envtest.
//
// The binaries come from KUBEBUILDER_ASSETS, or from the repository's bin/
// when it is unset; `make envtest` builds them there from the Go module
// proxy. A test never skips because they are missing: it fails and says how
// to build them.
//
// It lives with the operator, whose CRDs and admission policy it installs,
// and outside internal/ because the tests of the binaries, the examples and
// the Helm chart start their control planes with it too.
package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	// Kubeconfig is the path of a kubeconfig file for an admin user.
	Kubeconfig string
	// Assets is the directory of kube-apiserver, etcd and kubectl.
	Assets string
	// Started is how long the control plane took to start and take the CRDs.
	Started time.Duration

	env *envtest.Environment
}

// Options configure StartWith.
type Options struct {
	// APIServerFlags are more kube-apiserver flags, without "--", e.g.
	// "audit-log-path".
	APIServerFlags map[string]string
	// NoAdmission leaves out operator/config/admission (the policy that
	// sets a TinyModule's finalizer at creation), as a cluster before
	// Kubernetes 1.36 would.
	NoAdmission bool
}

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Assets returns the directory holding kube-apiserver, etcd and kubectl.
func Assets() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(Root(), "bin")
	}
	for _, name := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("kubetest: no %s in %s (KUBEBUILDER_ASSETS): run `make envtest` to build it", name, dir)
		}
	}
	return dir, nil
}

// Start starts a control plane with the operator's CRDs and admission
// policy and stops it when the test ends.
func Start(tb testing.TB) *Env {
	tb.Helper()
	return StartWith(tb, Options{})
}

// StartWith is Start with options.
func StartWith(tb testing.TB, o Options) *Env {
	tb.Helper()
	assets, err := Assets()
	if err != nil {
		tb.Fatal(err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(Root(), "operator", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	for k, v := range o.APIServerFlags {
		args.Set(k, v)
	}
	begin := time.Now()
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // whatever part of it started
		tb.Fatalf("kubetest: start control plane: %v", err)
	}
	started := time.Since(begin)
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("kubetest: stop control plane: %v", err)
		}
	})

	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		tb.Fatalf("kubetest: client: %v", err)
	}
	if !o.NoAdmission {
		if err := installAdmission(c); err != nil {
			tb.Fatalf("kubetest: %v", err)
		}
	}
	kubeconfig := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		tb.Fatal(err)
	}
	return &Env{Config: cfg, Client: c, Kubeconfig: kubeconfig, Assets: assets, Started: started, env: env}
}

// UserKubeconfig provisions a user authenticated by a client certificate,
// member of groups, and returns the path of a kubeconfig file for it.
func (e *Env) UserKubeconfig(tb testing.TB, name string, groups ...string) string {
	tb.Helper()
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		tb.Fatalf("kubetest: add user %s: %v", name, err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		tb.Fatalf("kubetest: kubeconfig of %s: %v", name, err)
	}
	path := filepath.Join(tb.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Kubectl runs the kubectl of the assets against the control plane, in the
// repository's root, and returns what it printed on stdout and stderr.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.Assets, "kubectl"), append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
	cmd.Dir = Root()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %v: %w\n%s", args, err, out.String())
	}
	return out.String(), err
}

// installAdmission creates the objects of operator/config/admission, as
// `kubectl apply -k operator/config/default` would, and waits until the
// apiserver applies the policy: until then it refuses TinyModule creates
// ("Resource kind ... not found") while it learns the CRD's types.
func installAdmission(c client.Client) error {
	if err := createAll(c, filepath.Join(Root(), "operator", "config", "admission", "finalizer.yaml")); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "admission-probe"},
			Spec: v1alpha1.TinyModuleSpec{Image: "registry.test/probe:1"}}
		err := c.Create(context.Background(), m, client.DryRunAll)
		if err == nil && len(m.Finalizers) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the admission policy never set a TinyModule's finalizer (finalizers %v, error %v)", m.Finalizers, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createAll creates the objects of a YAML file.
func createAll(c client.Client, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), &u); err != nil {
			return fmt.Errorf("%s: create %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
	}
}
