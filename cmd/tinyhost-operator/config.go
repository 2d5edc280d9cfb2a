package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tinyhost/tinyhost/operator"
)

// defaultNamespace holds the leader election lease of an operator that
// runs outside a pod; config/default installs the operator there.
const defaultNamespace = "tinyhost-system"

// serviceAccountNamespace is the file that names a pod's namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaderElectionNamespace is the namespace given, else the pod's, else
// defaultNamespace.
func leaderElectionNamespace(given string) string {
	if given != "" {
		return given
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return defaultNamespace
}

// envPrefix prefixes the environment variable of every flag:
// --probe-timeout is TINYHOST_OPERATOR_PROBE_TIMEOUT.
const envPrefix = "TINYHOST_OPERATOR_"

type config struct {
	MetricsAddr             string
	MetricsSecure           bool
	ProbeAddr               string
	PprofAddr               string
	LeaderElect             bool
	LeaderElectionNamespace string
	Operator                operator.Options
	Zap                     zap.Options

	// How the operator reaches hosts; see hostOptions.
	HostTLS       bool
	HostTLSCA     string
	HostTLSCert   string
	HostTLSKey    string
	HostTokenFile string
	// HostTokenPlaintext sends the token without TLS: for a mesh that
	// terminates TLS beside the host.
	HostTokenPlaintext bool
}

// parseConfig reads the flags in args and, for each flag not given, the
// environment variable envPrefix + its name in upper case with '_' for '-'.
func parseConfig(args, environ []string) (config, error) {
	var c config
	fs := pflag.NewFlagSet("tinyhost-operator", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", "0", `metrics address, e.g. ":8443"; "0" turns metrics off`)
	fs.BoolVar(&c.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers allowed to GET /metrics")
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&c.PprofAddr, "pprof-bind-address", "", `address of Go's /debug/pprof, e.g. "127.0.0.1:6060" ("" = off)`)
	fs.BoolVar(&c.LeaderElect, "leader-elect", true, "elect a leader, so that one operator acts at a time; --leader-elect=false for a lone operator")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's, else "+defaultNamespace+")")
	fs.DurationVar(&c.Operator.ProbeInterval, "probe-interval", 0, "how often each host is probed (default 1s)")
	fs.DurationVar(&c.Operator.ProbeTimeout, "probe-timeout", 0, "how long one probe may take (default 1s)")
	fs.IntVar(&c.Operator.FailureThreshold, "failure-threshold", 0, "failed probes in a row after which a host is NotReady and its modules move (default 3); a host whose connection closed and whose address refuses connections is NotReady at once")
	fs.DurationVar(&c.Operator.ResyncPeriod, "resync-period", 0, "how often a ready host is converged without an event (default 30s)")
	fs.IntVar(&c.Operator.MaxConcurrentReconciles, "max-concurrent-reconciles", 0, "how many modules, and how many hosts, are reconciled at once (default 8)")
	fs.BoolVar(&c.Operator.FetchArtifacts, "fetch-artifacts", false, "fetch module artifacts in the operator and stream them to hosts (default: hosts fetch them)")
	fs.StringVar(&c.Operator.ArtifactCacheDir, "artifact-cache-dir", "", "with --fetch-artifacts: cache of fetched artifacts (default $TMPDIR/tinyhost-operator-artifacts)")
	fs.StringSliceVar(&c.Operator.PlainHTTP, "plain-http", nil, "with --fetch-artifacts: registries (host or host:port) reached over plain HTTP, comma-separated")
	fs.StringVar(&c.Operator.DockerConfig, "docker-config", "", "with --fetch-artifacts: docker config file with registry credentials (default ~/.docker/config.json)")
	fs.StringVar(&c.Operator.HostLeaseNamespace, "host-lease-namespace", "", "namespace of the Leases of hosts that register themselves; a host whose Lease expires is NotReady at once (default "+operator.DefaultHostLeaseNamespace+")")
	fs.StringVar(&c.Operator.SpreadLabel, "spread-label", "", "TinyHost label whose values are failure domains (default topology.kubernetes.io/zone)")
	fs.BoolVar(&c.HostTLS, "host-tls", false, "reach hosts over TLS, verified against the system roots (implied by the --host-tls-* flags)")
	fs.StringVar(&c.HostTLSCA, "host-tls-ca", "", "PEM CA that signed the hosts' certificates")
	fs.StringVar(&c.HostTLSCert, "host-tls-cert", "", "PEM client certificate for hosts that require one (mTLS); its Subject Organization must name tinyhost:admin")
	fs.StringVar(&c.HostTLSKey, "host-tls-key", "", "PEM key of --host-tls-cert")
	fs.StringVar(&c.HostTokenFile, "host-token-file", "", "file holding the hosts' admin bearer token (their --token-file)")
	fs.BoolVar(&c.HostTokenPlaintext, "host-token-plaintext", false, "send the --host-token-file token without TLS (a mesh terminates TLS beside the hosts); by default a token goes only over TLS to a verified host")
	zapFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	c.Zap.BindFlags(zapFlags)
	fs.AddGoFlagSet(zapFlags)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: tinyhost-operator [flags]\n\nEvery flag may also be set as %s<FLAG>, e.g. %sPROBE_TIMEOUT=2s.\n\n%s", envPrefix, envPrefix, fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q: tinyhost-operator takes only flags", fs.Args())
	}

	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix) {
			env[k] = v
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		name := envPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := env[name]
		if !ok || f.Changed || err != nil {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s: %w", name, e)
		}
	})
	return c, err
}
