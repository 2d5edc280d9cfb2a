// Package operator runs tinyhost on Kubernetes: it places the modules that
// TinyModules ask for onto the hosts that TinyHosts name, and publishes where
// they run. Setup adds it to a controller-runtime manager; the manager's
// leader election makes sure one operator acts at a time, or, with
// Options.Shards, several replicas share the hosts and modules through
// Leases, each acting only on what it owns.
//
// A tour:
//
//   - api/v1alpha1: the TinyModule and TinyHost types, from which the
//     deepcopy code and the CRDs in config/crd are generated.
//   - internal/controller: the reconcilers. The module controller places
//     modules and writes TinyModule status; the host sync probes each host,
//     watches the Leases of hosts that register themselves, converges what
//     each has loaded over gRPC and writes TinyHost status; the services
//     controller gives each TinyModule a Service and EndpointSlices.
//   - internal/placement: which hosts run a module, as pure functions.
//   - internal/shard: with Options.Shards, the Leases through which
//     replicas share hosts and modules; the reconcilers see it as a gate.
//   - hostreg: the host's side of tinyhost --register (its TinyHost, its
//     Lease, the TinyModules of its own modules), the one package of the
//     operator the host daemon imports.
//   - kubetest: a real kube-apiserver and etcd with the CRDs, for the
//     tests of the operator and of the binaries and examples that use it.
//   - config: the manifests, for `kubectl apply -k config/default`.
//   - tools: the modules that build the envtest binaries.
package operator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel/trace"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/controller"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
	"github.com/tinyhost/tinyhost/operator/internal/shard"
)

// The operator's permissions; `make manifests` writes them into
// config/rbac/role.yaml.
//
// +kubebuilder:rbac:groups=operator.tinysystems.io,resources=tinymodules;tinyhosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=operator.tinysystems.io,resources=tinymodules/status;tinyhosts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=operator.tinysystems.io,resources=tinymodules/finalizers;tinyhosts/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch,namespace=tinyhost-system
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create;update;patch;delete,namespace=tinyhost-system
//
// Secrets: list and watch for a watch of their metadata only, get for the
// values of the Secrets that TinyModules name (spec.secrets).
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// DefaultHostLeaseNamespace is where hosts renew their Leases unless told
// otherwise, the namespace of config/host and config/default.
const DefaultHostLeaseNamespace = "tinyhost-system"

// Options configure the operator. The zero value is usable: every zero field
// takes the default its comment names.
type Options struct {
	// ProbeInterval is how often each host is probed (Info). Default 1s.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe, and one count of a module's dead
	// letters (TinyModule status.deadLetters). Default 1s.
	ProbeTimeout time.Duration
	// FailureThreshold is how many probes in a row must fail before the
	// host is NotReady and its modules are placed elsewhere. Default 3: with
	// the defaults a host that stops answering is NotReady within 3–4 s.
	// A host whose connection closed and whose address then refuses
	// connections (its process died) is NotReady at once.
	FailureThreshold int
	// SpreadLabel is the TinyHost label whose values are failure domains.
	// Default placement.DefaultSpreadLabel.
	SpreadLabel string
	// ResyncPeriod is how often a ready host is converged without an event.
	// Default 30s.
	ResyncPeriod time.Duration
	// MaxConcurrentReconciles is how many modules, and how many hosts,
	// the operator reconciles at once. Default
	// controller.DefaultMaxConcurrentReconciles (8).
	MaxConcurrentReconciles int
	// MaxTableBytes bounds each table message a host is given: the
	// wiring table (one SetWiring message), and each part of the route
	// table, which goes in parts past it (the first whole, the rest as
	// deltas). MaxWiringBytesPerNamespace bounds each namespace's share
	// of the wiring: a namespace over its share, or that does not fit
	// beside the namespaces with less, has none of its wires sent, and its
	// TinyModules say so (Wired=False, WiringOverBudget). Keep
	// MaxTableBytes below the hosts' message limit (tinyhost
	// --max-message-bytes). Defaults controller.DefaultMaxTableBytes (3
	// MiB) and controller.DefaultMaxWiringBytesPerNamespace (512 KiB).
	MaxTableBytes, MaxWiringBytesPerNamespace int
	// MaxLoadsPerNamespace bounds the loads to one host under way at once
	// for the TinyModules of one namespace, so that one tenant's slow or
	// hung artifacts cannot take every load of a host. Default
	// controller.DefaultMaxLoadsPerNamespace (4).
	MaxLoadsPerNamespace int

	// MaxStatusSchemaBytes bounds the port schemas a TinyModule's status
	// (components[].ports[].schema) carries together; schemas past it are
	// left out and their ports say schemaOmitted. Default
	// controller.DefaultMaxStatusSchemaBytes (256 KiB).
	MaxStatusSchemaBytes int

	// FetchArtifacts makes the operator fetch module artifacts itself and
	// stream the bytes to the hosts, for hosts that cannot reach the
	// registry. By default a host is told the artifact's reference
	// (LoadHeader.source) and fetches it, verified and cached, itself; the
	// three options below then do not apply.
	FetchArtifacts bool
	// ArtifactCacheDir is where fetched module artifacts are cached by
	// digest. Default: tinyhost-operator-artifacts in the temporary
	// directory.
	ArtifactCacheDir string
	// PlainHTTP lists registries ("host" or "host:port") reached over plain
	// HTTP instead of HTTPS.
	PlainHTTP []string
	// DockerConfig is the docker config file with registry credentials.
	// Default: $DOCKER_CONFIG/config.json or ~/.docker/config.json.
	DockerConfig string

	// HostLeaseNamespace holds the Leases that hosts registering
	// themselves renew (tinyhost --register --namespace); the operator
	// watches Leases there only. A host with a Lease there is NotReady
	// the moment it expires. Default DefaultHostLeaseNamespace.
	HostLeaseNamespace string
	// Host says how the operator reaches hosts: TLS files or
	// configuration, a bearer token or its file (read once, by Setup).
	// Default: plain text, no token.
	Host client.Options

	// Shards, when set, makes this operator one of several replicas that
	// share the hosts and modules through Leases; the manager must not
	// elect a leader then. Nil: this operator acts on everything.
	Shards *ShardOptions

	// TracerProvider, when set, records a span per reconcile; give Host
	// a stats handler of the same provider (grpc.WithStatsHandler) and
	// the calls to hosts are the reconciles' children. Nil: none.
	TracerProvider trace.TracerProvider
}

// ShardOptions configure an operator replica that shares the work with
// others. Each host is owned by one replica through a Lease (it probes the
// host, loads and unloads on it, pushes it the route tables and writes
// its TinyHost status); TinyModules are hashed into ShardBuckets buckets,
// each owned by one replica through a Lease (it places the module, writes
// its status, Service and EndpointSlices); and each replica renews a
// membership Lease. Replicas balance by count: each holds at most its
// share, ceil(total / live replicas), of hosts and of buckets.
type ShardOptions struct {
	// Identity names this replica in its Leases: a pod's name, say. It
	// must be unique among the replicas and a DNS subdomain part.
	Identity string
	// Namespace holds the shard Leases. Default DefaultHostLeaseNamespace.
	Namespace string
	// LeaseDuration is how long a Lease is held without renewal, in whole
	// seconds: a dead replica's hosts and modules are taken over within
	// it plus RetryPeriod. Default 15s.
	LeaseDuration time.Duration
	// RenewDeadline, below LeaseDuration, is how long a replica acts on a
	// shard without renewing its Lease: after it, nothing more of the
	// replica's for that shard is written. Default 10s.
	RenewDeadline time.Duration
	// RetryPeriod is how often a replica renews, balances and retries.
	// Default 2s.
	RetryPeriod time.Duration
}

// ShardBuckets is the number of buckets TinyModules are hashed into.
const ShardBuckets = shard.Buckets

// ShardLabel labels the shard Leases with their kind: host, bucket or
// member.
const ShardLabel = shard.Label

// HostShardLease is the name of the shard Lease that governs a host.
func HostShardLease(host string) string { return shard.HostLease(host) }

// ModuleShardLease is the name of the shard Lease that governs the
// TinyModule namespace/name (its bucket's).
func ModuleShardLease(namespace, name string) string {
	return shard.BucketLease(shard.ModuleBucket(namespace, name))
}

func (s *ShardOptions) withDefaults() *shard.Options {
	if s == nil {
		return nil
	}
	o := shard.Options{Identity: s.Identity, Namespace: s.Namespace,
		LeaseDuration: s.LeaseDuration, RenewDeadline: s.RenewDeadline, RetryPeriod: s.RetryPeriod}
	if o.Namespace == "" {
		o.Namespace = DefaultHostLeaseNamespace
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = 2 * time.Second
	}
	return &o
}

func (o Options) withDefaults() (Options, error) {
	if o.ProbeInterval < 0 || o.ProbeTimeout < 0 || o.FailureThreshold < 0 || o.ResyncPeriod < 0 || o.MaxConcurrentReconciles < 0 ||
		o.MaxTableBytes < 0 || o.MaxWiringBytesPerNamespace < 0 || o.MaxLoadsPerNamespace < 0 ||
		o.MaxStatusSchemaBytes < 0 {
		return o, errors.New("operator: ProbeInterval, ProbeTimeout, FailureThreshold, ResyncPeriod, MaxConcurrentReconciles, MaxLoadsPerNamespace, MaxStatusSchemaBytes and the wiring bounds must not be negative")
	}
	if o.MaxLoadsPerNamespace == 0 {
		o.MaxLoadsPerNamespace = controller.DefaultMaxLoadsPerNamespace
	}
	if o.MaxTableBytes == 0 {
		o.MaxTableBytes = controller.DefaultMaxTableBytes
	}
	if o.MaxWiringBytesPerNamespace == 0 {
		o.MaxWiringBytesPerNamespace = controller.DefaultMaxWiringBytesPerNamespace
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = controller.DefaultMaxConcurrentReconciles
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = time.Second
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = time.Second
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = 3
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = 30 * time.Second
	}
	if o.SpreadLabel == "" {
		o.SpreadLabel = placement.DefaultSpreadLabel
	}
	if o.HostLeaseNamespace == "" {
		o.HostLeaseNamespace = DefaultHostLeaseNamespace
	}
	if o.ArtifactCacheDir == "" {
		o.ArtifactCacheDir = filepath.Join(os.TempDir(), "tinyhost-operator-artifacts")
	}
	return o, nil
}

// Setup adds the operator's controllers to the manager: the placement and
// status of TinyModules, the host sync of TinyHosts (probes and Leases),
// and each TinyModule's Service and EndpointSlices. The manager's scheme
// must know the v1alpha1 types (v1alpha1.AddToScheme) and client-go's.
func Setup(mgr manager.Manager, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	if o.Host, err = o.Host.Resolve(); err != nil {
		return fmt.Errorf("operator: hosts: %w", err)
	}
	gvk := v1alpha1.GroupVersion.WithKind("TinyModule")
	if !mgr.GetScheme().Recognizes(gvk) {
		return fmt.Errorf("operator: the manager's scheme does not know %s: add v1alpha1.AddToScheme", gvk)
	}
	// Services, EndpointSlices and Leases.
	for _, gvk := range []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("Service"),
		discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"),
		coordinationv1.SchemeGroupVersion.WithKind("Lease"),
	} {
		if !mgr.GetScheme().Recognizes(gvk) {
			return fmt.Errorf("operator: the manager's scheme does not know %s: add client-go's scheme (k8s.io/client-go/kubernetes/scheme.AddToScheme)", gvk)
		}
	}
	var loader controller.Loader = controller.SourceLoader{}
	if o.FetchArtifacts {
		artifacts, err := artifact.New(artifact.Options{
			CacheDir:     o.ArtifactCacheDir,
			PlainHTTP:    o.PlainHTTP,
			DockerConfig: o.DockerConfig,
			// A reconcile retries on its own, with backoff: keep one
			// fetch short.
			Attempts:     2,
			RetryTimeout: 10 * time.Second,
		})
		if err != nil {
			return fmt.Errorf("operator: %w", err)
		}
		loader = controller.FetchLoader{Client: artifacts}
	}
	return controller.Setup(mgr, controller.Options{
		ProbeInterval:              o.ProbeInterval,
		ProbeTimeout:               o.ProbeTimeout,
		FailureThreshold:           o.FailureThreshold,
		SpreadLabel:                o.SpreadLabel,
		Resync:                     o.ResyncPeriod,
		Loader:                     loader,
		MaxConcurrentReconciles:    o.MaxConcurrentReconciles,
		MaxTableBytes:              o.MaxTableBytes,
		MaxWiringBytesPerNamespace: o.MaxWiringBytesPerNamespace,
		MaxLoadsPerNamespace:       o.MaxLoadsPerNamespace,
		MaxStatusSchemaBytes:       o.MaxStatusSchemaBytes,
		Host:                       o.Host,
		LeaseNamespace:             o.HostLeaseNamespace,
		Shards:                     o.Shards.withDefaults(),
		TracerProvider:             o.TracerProvider,
	})
}
