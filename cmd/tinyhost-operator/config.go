package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

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

// errVersion is returned by parseConfig for --version.
var errVersion = errors.New("version requested")

type config struct {
	MetricsAddr             string
	MetricsSecure           bool
	ProbeAddr               string
	PprofAddr               string
	LeaderElect             bool
	LeaderElectionNamespace string
	// Shards, ShardIdentity and the durations: see shardOptions.
	Shards             bool
	ShardIdentity      string
	ShardLeaseDuration time.Duration
	ShardRenewDeadline time.Duration
	ShardRetryPeriod   time.Duration
	Operator           operator.Options
	Zap                zap.Options

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
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease, or of the shard Leases (default: the pod's, else "+defaultNamespace+")")
	fs.BoolVar(&c.Shards, "shards", false, "share the hosts and modules with the other replicas run so, through Leases (each host, and each of 16 buckets of modules, is owned by one replica; replicas balance by count), instead of electing a leader; implies --leader-elect=false")
	fs.StringVar(&c.ShardIdentity, "shard-identity", "", "with --shards: this replica's name in its Leases, unique among the replicas (default $POD_NAME, else hostname-pid)")
	fs.DurationVar(&c.ShardLeaseDuration, "shard-lease-duration", 0, "with --shards: how long a shard Lease is held without renewal, whole seconds; a dead replica's hosts are taken over within it plus --shard-retry-period (default 15s)")
	fs.DurationVar(&c.ShardRenewDeadline, "shard-renew-deadline", 0, "with --shards: how long a replica acts on a shard without renewing its Lease, below --shard-lease-duration (default 10s)")
	fs.DurationVar(&c.ShardRetryPeriod, "shard-retry-period", 0, "with --shards: how often a replica renews, balances and retries (default 2s)")
	fs.DurationVar(&c.Operator.ProbeInterval, "probe-interval", 0, "how often each host is probed (default 1s)")
	fs.DurationVar(&c.Operator.ProbeTimeout, "probe-timeout", 0, "how long one probe, or one dead-letter count, may take (default 1s)")
	fs.IntVar(&c.Operator.FailureThreshold, "failure-threshold", 0, "failed probes in a row after which a host is NotReady and its modules move (default 3); a host whose connection closed and whose address refuses connections is NotReady at once")
	fs.DurationVar(&c.Operator.ResyncPeriod, "resync-period", 0, "how often a ready host is converged without an event (default 30s)")
	fs.IntVar(&c.Operator.MaxConcurrentReconciles, "max-concurrent-reconciles", 0, "how many modules, and how many hosts, are reconciled at once (default 8)")
	fs.IntVar(&c.Operator.MaxTableBytes, "max-table-bytes", 0, "bound of each table message a host is given, in bytes: the wiring table, and each part of the route table, which goes in parts past it; keep it below the hosts' --max-message-bytes (default 3 MiB)")
	fs.IntVar(&c.Operator.MaxStatusSchemaBytes, "max-status-schema-bytes", 0, "bound of the port schemas a TinyModule's status carries together, in bytes; schemas past it are left out and their ports say schemaOmitted (default 256 KiB)")
	fs.IntVar(&c.Operator.MaxWiringBytesPerNamespace, "max-wiring-bytes-per-namespace", 0, "bound of each namespace's share of the wiring table, in bytes: a namespace over it, or that does not fit beside the namespaces with less, has none of its wires sent, and its TinyModules say so (Wired=False, WiringOverBudget) (default 512 KiB)")
	fs.IntVar(&c.Operator.MaxLoadsPerNamespace, "max-loads-per-namespace", 0, "how many loads to one host may be under way at once for the TinyModules of one namespace; the rest wait, so that one tenant's slow or hung artifacts cannot take every load of a host (default 4)")
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
	version := fs.Bool("version", false, "print the version and exit")
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
	if *version {
		return c, errVersion
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
	if err == nil && c.Shards && c.LeaderElect && fs.Changed("leader-elect") {
		err = errors.New("--shards and --leader-elect: replicas share the work or elect a leader, not both")
	}
	return c, err
}

// shardOptions are the operator's shard options of --shards, nil
// without. The identity is --shard-identity, else $POD_NAME, else
// hostname-pid, in lower case.
func shardOptions(c config, environ []string) *operator.ShardOptions {
	if !c.Shards {
		return nil
	}
	id := c.ShardIdentity
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "POD_NAME="); ok && id == "" {
			id = v
		}
	}
	if id == "" {
		host, _ := os.Hostname()
		id = host + "-" + strconv.Itoa(os.Getpid())
	}
	return &operator.ShardOptions{
		Identity:      strings.ToLower(id),
		Namespace:     leaderElectionNamespace(c.LeaderElectionNamespace),
		LeaseDuration: c.ShardLeaseDuration,
		RenewDeadline: c.ShardRenewDeadline,
		RetryPeriod:   c.ShardRetryPeriod,
	}
}
