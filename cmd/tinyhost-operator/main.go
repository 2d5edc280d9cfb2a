// Command tinyhost-operator runs the tinyhost operator on Kubernetes: a
// controller-runtime manager with leader election (or, with --shards,
// replicas that share the work through Leases), metrics and health
// probes, to which operator.Setup adds the controllers. Run
// `tinyhost-operator --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/tinyhost/tinyhost/internal/buildinfo"
	"github.com/tinyhost/tinyhost/internal/tracing"
	"github.com/tinyhost/tinyhost/operator"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Environ())
	switch {
	case errors.Is(err, pflag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errVersion):
		fmt.Println("tinyhost-operator", buildinfo.Version())
		os.Exit(0)
	case err != nil:
		fmt.Fprintf(os.Stderr, "tinyhost-operator: %v\nRun 'tinyhost-operator --help' for usage.\n", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "tinyhost-operator: %v\n", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&cfg.Zap)))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Operator.Shards = shardOptions(cfg, os.Environ())
	if s := cfg.Operator.Shards; s != nil {
		// The apiserver's audit log tells the replicas apart.
		restConfig.UserAgent = "tinyhost-operator/" + s.Identity
	}
	metrics := metricsserver.Options{BindAddress: cfg.MetricsAddr, SecureServing: cfg.MetricsSecure}
	if cfg.MetricsSecure {
		// Only callers whose token may GET /metrics see them.
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:  scheme,
		Metrics: metrics,
		// The controllers never read managedFields: the cache keeps
		// objects without them, and the operator's updates then send
		// none (the apiserver keeps the stored ones).
		Cache:                         cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		HealthProbeBindAddress:        cfg.ProbeAddr,
		PprofBindAddress:              cfg.PprofAddr,
		LeaderElection:                cfg.LeaderElect && !cfg.Shards,
		LeaderElectionID:              "tinyhost-operator.operator.tinysystems.io",
		LeaderElectionNamespace:       leaderElectionNamespace(cfg.LeaderElectionNamespace),
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if cfg.Operator.Host, err = hostOptions(cfg); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	// Off (nil) unless the OTEL_* environment asks for traces.
	tr, err := tracing.New(ctx, os.Getenv, "tinyhost-operator", buildinfo.Version())
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(sctx)
	}()
	cfg.Operator.TracerProvider = tr.Provider()
	cfg.Operator.Host.DialOptions = append(cfg.Operator.Host.DialOptions, tr.DialOptions()...)
	if err := operator.Setup(mgr, cfg.Operator); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
