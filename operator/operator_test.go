package operator_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/tinyhost/tinyhost/operator"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

func TestSetup(t *testing.T) {
	env := kubetest.Start(t)
	newManager := func(t *testing.T, withAPI bool) ctrl.Manager {
		scheme := runtime.NewScheme()
		require.NoError(t, clientgoscheme.AddToScheme(scheme))
		if withAPI {
			require.NoError(t, v1alpha1.AddToScheme(scheme))
		}
		skip := true // each case adds the controllers to a manager of its own
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
			Controller: config.Controller{SkipNameValidation: &skip}})
		require.NoError(t, err)
		return mgr
	}
	tests := []struct {
		name    string
		withAPI bool
		opts    operator.Options
		wantErr string
	}{
		{name: "zero options", withAPI: true},
		{name: "fetching artifacts in the operator", withAPI: true, opts: operator.Options{FetchArtifacts: true, ArtifactCacheDir: t.TempDir()}},
		{name: "negative", withAPI: true, opts: operator.Options{ProbeInterval: -time.Second}, wantErr: "must not be negative"},
		{name: "negative threshold", withAPI: true, opts: operator.Options{FailureThreshold: -1}, wantErr: "must not be negative"},
		{name: "negative workers", withAPI: true, opts: operator.Options{MaxConcurrentReconciles: -1}, wantErr: "must not be negative"},
		{name: "a bad plain-HTTP registry", withAPI: true, opts: operator.Options{FetchArtifacts: true, PlainHTTP: []string{"http://x/y"}}, wantErr: "PlainHTTP"},
		{name: "a scheme without the API", wantErr: "add v1alpha1.AddToScheme"},
		{name: "shards", withAPI: true, opts: operator.Options{Shards: &operator.ShardOptions{Identity: "op-0"}}},
		{name: "shards, a renew deadline past the lease", withAPI: true,
			opts: operator.Options{Shards: &operator.ShardOptions{Identity: "op-0", LeaseDuration: 2 * time.Second, RenewDeadline: 3 * time.Second}}, wantErr: "renew deadline"},
		{name: "shards, a lease of a fraction of a second", withAPI: true,
			opts: operator.Options{Shards: &operator.ShardOptions{Identity: "op-0", LeaseDuration: 1500 * time.Millisecond}}, wantErr: "whole number of seconds"},
		{name: "shards, an identity no Lease can name", withAPI: true, opts: operator.Options{Shards: &operator.ShardOptions{Identity: "Op_0"}}, wantErr: "shard identity"},
	}
	t.Run("a scheme without client-go's", func(t *testing.T) {
		scheme := runtime.NewScheme()
		require.NoError(t, v1alpha1.AddToScheme(scheme))
		skip := true
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
			Controller: config.Controller{SkipNameValidation: &skip}})
		require.NoError(t, err)
		assert.ErrorContains(t, operator.Setup(mgr, operator.Options{}), "add client-go's scheme")
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := operator.Setup(newManager(t, tt.withAPI), tt.opts)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}
}

// TestBinary runs cmd/tinyhost-operator against a real apiserver: it takes
// the leader lease, answers its health probes, serves metrics only to
// authenticated callers, and on SIGTERM releases the lease and exits 0.
func TestBinary(t *testing.T) {
	env := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)

	bin := filepath.Join(t.TempDir(), "tinyhost-operator")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tinyhost-operator")
	build.Dir = kubetest.Root()
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	probes, metrics := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin,
		"--leader-elect", "--leader-election-namespace=default",
		"--health-probe-bind-address="+probes, "--metrics-bind-address="+metrics)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	var logs bytes.Buffer // read only once the process has exited
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("operator output:\n%s", logs.String())
		}
	})

	lease := types.NamespacedName{Namespace: "default", Name: "tinyhost-operator.operator.tinysystems.io"}
	require.Eventually(t, func() bool {
		if status(ctx, "http://"+probes+"/readyz") != http.StatusOK {
			return false
		}
		var l coordinationv1.Lease
		return env.Client.Get(ctx, lease, &l) == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	}, 2*time.Minute, 100*time.Millisecond, "the operator to be ready and lead")
	assert.Equal(t, http.StatusOK, status(ctx, "http://"+probes+"/healthz"))
	// The metrics server may start listening a moment after the probes.
	require.Eventually(t, func() bool {
		return status(ctx, "https://"+metrics+"/metrics") == http.StatusUnauthorized
	}, 2*time.Minute, 100*time.Millisecond, "metrics to refuse a caller without a token")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
		require.NoError(t, waitErr, "exit status")
	case <-ctx.Done():
		t.Fatal("the operator did not exit after SIGTERM")
	}
	var l coordinationv1.Lease
	require.NoError(t, env.Client.Get(ctx, lease, &l))
	assert.True(t, l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "", "the lease is released on exit")
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

var insecure = &http.Client{
	Timeout:   2 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // the metrics cert is self-signed
}

func status(ctx context.Context, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := insecure.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
