package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TinyModule asks for a module to run on tinyhost hosts and publishes where
// it runs. A manifest with only metadata and spec.image, as in the Tiny
// Systems docs, is a complete TinyModule: one replica on any ready host.
//
// The object's name is the module's name on every host and in every address
// (module/component/port), so it must be a valid module name, as the host
// checks it: a lower-case letter first, then lower-case letters, digits,
// '-' and '.', at most 63 characters.
//
// Module names are one namespace across all hosts: a host runs one module
// of a name, and a wire or a route names a module by its name alone. The
// first TinyModule of a name (by creation time, then namespace) owns it;
// a TinyModule of the same name in another namespace, or a module a host
// loaded on its own, is never unloaded, replaced or routed by another
// TinyModule, which is refused with reason NameConflict instead.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=tm,categories=tinysystems
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,priority=1
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`,priority=1
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.readyReplicas`,priority=1
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updatedReplicas`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Dead-Letters",type=integer,JSONPath=`.status.deadLetters`,priority=1
// +kubebuilder:printcolumn:name="Provided-By",type=string,JSONPath=`.spec.providedBy`,priority=1
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z][a-z0-9._-]{0,62}$')",message="metadata.name is the module's name on hosts: it must start with a lower-case letter, use only a-z, 0-9, '-' and '.', and be at most 63 characters"
type TinyModule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TinyModuleSpec `json:"spec"`
	// +optional
	Status TinyModuleStatus `json:"status,omitempty"`
}

// TinyModuleList is a list of TinyModules.
//
// +kubebuilder:object:root=true
type TinyModuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TinyModule `json:"items"`
}

// TinyModuleSpec is what the user asks for. The artifact is named once, by
// image or by source; host mappings may name other artifacts for some hosts.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.image) && has(self.source))",message="spec.image and spec.source are mutually exclusive: name the artifact one way"
// +kubebuilder:validation:XValidation:rule="has(self.providedBy) || has(self.image) || has(self.source) || (has(self.hostMappings) && size(self.hostMappings) > 0 && self.hostMappings.all(m, has(m.image) || has(m.source)))",message="spec.image or spec.source is required (or an image or source in every host mapping)"
// +kubebuilder:validation:XValidation:rule="!has(self.providedBy) || !(has(self.image) || has(self.source) || has(self.hostMappings))",message="a module provided by a host names no artifact: spec.image, spec.source and spec.hostMappings must be empty with spec.providedBy"
// +kubebuilder:validation:XValidation:rule="!(has(self.placement) && self.placement.mode == 'EveryHost' && has(self.replicas))",message="spec.replicas and spec.placement.mode EveryHost conflict: an every-host module runs once on each selected host; remove one"
// +kubebuilder:validation:XValidation:rule="!has(self.providedBy) || !has(self.placement)",message="a module provided by a host runs on that host only: spec.placement must be empty with spec.providedBy"
// +kubebuilder:validation:XValidation:rule="has(self.providedBy) == has(oldSelf.providedBy) && (!has(self.providedBy) || self.providedBy == oldSelf.providedBy)",message="spec.providedBy is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.secrets) || self.secrets.all(s, has(self.capabilities) && ('secret:' + s.name) in self.capabilities)",message="every spec.secrets name must be granted in spec.capabilities as secret:<name>"
// +kubebuilder:validation:XValidation:rule="!has(self.providedBy) || !has(self.secrets)",message="a module provided by a host takes its secrets from the host: spec.secrets must be empty with spec.providedBy"
type TinyModuleSpec struct {
	// ProvidedBy is the name of the TinyHost that loaded the module on its
	// own (from its modules directory, or a load not made by the operator)
	// and published it by creating this TinyModule in its namespace. The
	// operator places such a module on no other host and never loads or
	// unloads it; it publishes its status and routes it from every host
	// like any other. Limits, capabilities and config are the host's to
	// choose and do not apply; wiring does. Set by the host; immutable.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ProvidedBy string `json:"providedBy,omitempty"`

	// Image is an OCI reference (by tag or digest) to the module's wasm
	// artifact.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// Source is an https URL of the module's wasm file with its sha256; an
	// alternative to Image.
	//
	// +optional
	Source *Source `json:"source,omitempty"`

	// Replicas is how many hosts run the module; each host runs it at most
	// once. Zero unloads it everywhere and keeps the object. Absent means
	// one, or, with placement mode EveryHost (which refuses it), one on
	// every selected host.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1024
	Replicas *int32 `json:"replicas,omitempty"`

	// Placement chooses how the module's hosts are counted: a number of
	// replicas (the default), or every selected host.
	//
	// +optional
	Placement *PlacementPolicy `json:"placement,omitempty"`

	// Strategy bounds how a change of what hosts load (artifact, limits,
	// capabilities, config) rolls across the replicas.
	//
	// +optional
	Strategy *RolloutStrategy `json:"strategy,omitempty"`

	// HostSelector selects the TinyHosts, by their labels, that may run the
	// module. Absent, every host may.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="hostSelector: operator must be one of In, NotIn, Exists, DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['In', 'NotIn']) || (has(e.values) && size(e.values) > 0))",message="hostSelector: In and NotIn need at least one value"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="hostSelector: Exists and DoesNotExist take no values"
	HostSelector *metav1.LabelSelector `json:"hostSelector,omitempty"`

	// HostMappings name the artifact for hosts by the ABI versions they load
	// or by their version, like the kernelMappings of Kernel Module
	// Management. The first mapping that matches a host decides; a mapping
	// without an artifact uses Image or Source. When there are mappings, a
	// host that matches none does not run the module.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	HostMappings []HostMapping `json:"hostMappings,omitempty"`

	// Limits of the module on each host. Absent fields take the host's
	// defaults.
	//
	// +optional
	Limits *Limits `json:"limits,omitempty"`

	// Capabilities are the host capabilities granted to the module, named as
	// the host's LoadModule takes them: log, config, timer, and messaging
	// grants. messaging alone lets the module send to and call every
	// module; messaging:<module> grants one module and
	// messaging:<module>/<component> one component, and grants add up. A
	// send or call to a target not granted is denied, and so is one to a
	// module of another namespace, whatever the grants: a module messages
	// its own namespace's modules and the ones the hosts provide
	// (spec.providedBy) only. Omitted, the module
	// gets the host's default capabilities (log and config unless the host
	// is configured otherwise); [none] grants none at all. An empty list
	// is refused, since it would read as "none" and be taken for the
	// defaults.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="capabilities: [] is ambiguous: omit the field for the host's default capabilities, or write [none] for no capability"
	// +kubebuilder:validation:XValidation:rule="!self.exists(c, c == 'none') || size(self) == 1",message="capabilities: none goes alone"
	Capabilities []Capability `json:"capabilities,omitempty"`

	// Config is the module's configuration, a JSON object. Each component
	// receives the member named after it ({} when there is none) on its
	// _settings port, in every new instance and whenever the configuration
	// changes; a module granted the config capability reads the whole object.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Config *runtime.RawExtension `json:"config,omitempty"`

	// Secrets give values to the module's secret:<name> grants from
	// Kubernetes Secrets of the TinyModule's own namespace (a TinyModule
	// cannot name another namespace's Secret). The operator reads only
	// these Secrets and delivers the values with the load over its TLS
	// connection to the host, which keeps them in memory; a changed Secret
	// reaches the module without a reload. Each name must be granted in
	// capabilities as secret:<name>. A Secret or key that does not exist
	// holds the module Loading, its Ready condition naming it.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Secrets []SecretRef `json:"secrets,omitempty"`

	// Wiring connects the module's output ports to input ports of a
	// module of its own namespace or one the hosts provide
	// (spec.providedBy), so that what a component emits flows on without
	// the component naming its target. A wire to a module of another
	// namespace is left out of the hosts' wiring (Wired=False, reason
	// OtherNamespace), and the hosts refuse what it would carry.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Wiring []Wire `json:"wiring,omitempty"`
}

// PlacementMode says how many hosts run a module.
//
// +kubebuilder:validation:Enum=Replicas;EveryHost
type PlacementMode string

const (
	// PlacementReplicas runs spec.replicas replicas on the hosts placement
	// picks.
	PlacementReplicas PlacementMode = "Replicas"
	// PlacementEveryHost runs the module once on every ready, schedulable
	// host its hostSelector and hostMappings match, like a DaemonSet or
	// KMM's per-node modules: a host that joins or starts to match gets
	// it, a host that leaves, is cordoned or stops matching loses it.
	PlacementEveryHost PlacementMode = "EveryHost"
)

// PlacementPolicy chooses the placement mode.
type PlacementPolicy struct {
	// Mode is Replicas (spec.replicas hosts) or EveryHost (every selected
	// host; spec.replicas must be absent).
	//
	// +optional
	// +kubebuilder:default=Replicas
	Mode PlacementMode `json:"mode,omitempty"`
}

// RolloutStrategy bounds a rollout, as a Deployment's RollingUpdate does:
// the replicas are updated in steps of at most maxSurge + maxUnavailable
// (at least one), each step starting when the replicas of the step before
// are Ready with the new spec or were refused by their host (placement
// then moves them). A host updates its replica in place: it loads the new
// version beside the old one, which keeps serving until the new one is
// ready and then finishes the calls in flight, so an updating replica
// stays Ready and a rollout never takes a replica out of the routes.
// The defaults, maxUnavailable 0 and maxSurge 1, update one replica at a
// time. Moves are make-before-break whatever the strategy: a replica
// leaving a host stays there, Draining, until its replacement is Ready.
type RolloutStrategy struct {
	// MaxUnavailable: replicas the rollout may update at once on top of
	// maxSurge, as a number or a percentage of the replicas (rounded
	// down). Default 0.
	//
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]{1,3}%$')",message="maxUnavailable must be a number >= 0 or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxSurge: replicas that may run the new version beside the old one
	// (updating in place) at once, as a number or a percentage of the
	// replicas (rounded up). Default 1.
	//
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]{1,3}%$')",message="maxSurge must be a number >= 0 or a percentage such as 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// Source is a module's wasm file at an https URL, verified by its digest.
type Source struct {
	// URL of the wasm file.
	//
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https://[^\\\\s]+$')",message="source.url must be an https URL"
	URL string `json:"url"`

	// SHA256 is the hex sha256 of the file; a file with another digest is
	// refused.
	//
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-f]{64}$')",message="source.sha256 must be 64 lower-case hex digits"
	SHA256 string `json:"sha256"`
}

// HostMapping matches hosts by the ABI versions they load and by their
// version; every field set must match. It names the artifact for those hosts,
// or uses the module's own.
//
// +kubebuilder:validation:XValidation:rule="has(self.abi) || has(self.hostVersion) || has(self.hostVersionRegexp)",message="a host mapping matches hosts by abi, hostVersion or hostVersionRegexp: set at least one"
// +kubebuilder:validation:XValidation:rule="!(has(self.hostVersion) && has(self.hostVersionRegexp))",message="hostVersion and hostVersionRegexp are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="!(has(self.image) && has(self.source))",message="a host mapping names its artifact by image or by source, not both"
type HostMapping struct {
	// ABI matches hosts that load this guest ABI version. The mapping's
	// artifact must speak it.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	ABI *int32 `json:"abi,omitempty"`

	// HostVersion matches hosts of exactly this version.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	HostVersion string `json:"hostVersion,omitempty"`

	// HostVersionRegexp matches hosts whose version matches this regular
	// expression (Go RE2 syntax).
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	HostVersionRegexp string `json:"hostVersionRegexp,omitempty"`

	// Image is an OCI reference to the artifact for these hosts.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// Source is an https URL of the artifact for these hosts.
	//
	// +optional
	Source *Source `json:"source,omitempty"`
}

// Limits bound a module on each host it runs on.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minInstances) || !has(self.maxInstances) || self.minInstances <= self.maxInstances",message="limits.minInstances must not exceed limits.maxInstances"
type Limits struct {
	// MemoryPages is the linear memory of one instance, in 64 KiB pages.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	MemoryPages *int32 `json:"memoryPages,omitempty"`

	// CallTimeout bounds one call into the module, e.g. "2s" or "250ms".
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	CallTimeout *metav1.Duration `json:"callTimeout,omitempty"`

	// QueueTimeout bounds how long a call waits for a free instance.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	QueueTimeout *metav1.Duration `json:"queueTimeout,omitempty"`

	// IdleTimeout is how long an instance beyond minInstances may stay
	// idle before the host closes it.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// MaxMessageBytes bounds a message to or from the module.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxMessageBytes *int32 `json:"maxMessageBytes,omitempty"`

	// MinInstances is how many instances the host keeps warm; absent is 1,
	// whatever the host's own default (tinyhost --min-instances), so that
	// placement counts what the host holds. A warm instance answers at
	// once and holds its memory while idle. 0 keeps none: the module's instances close after
	// idleTimeout, and its next call first starts one, paying an
	// instantiation.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4096
	MinInstances *int32 `json:"minInstances,omitempty"`

	// MaxInstances bounds the module's instance pool on one host.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	MaxInstances *int32 `json:"maxInstances,omitempty"`

	// HTTPTimeout bounds one outbound HTTP request (capability
	// http:<host>), within the call's deadline.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
	HTTPTimeout *metav1.Duration `json:"httpTimeout,omitempty"`

	// HTTPMaxRequestBytes and HTTPMaxResponseBytes bound the body of an
	// outbound HTTP request and of its response.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	HTTPMaxRequestBytes *int32 `json:"httpMaxRequestBytes,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	HTTPMaxResponseBytes *int32 `json:"httpMaxResponseBytes,omitempty"`

	// HTTPMaxHeaders and HTTPMaxHeaderBytes bound the headers of an
	// outbound HTTP request or response: their number and their bytes.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	HTTPMaxHeaders *int32 `json:"httpMaxHeaders,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2097152
	HTTPMaxHeaderBytes *int32 `json:"httpMaxHeaderBytes,omitempty"`

	// HTTPMaxRedirects is how many redirects one outbound HTTP request
	// follows, at most 5; -1 follows none.
	//
	// +optional
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=5
	HTTPMaxRedirects *int32 `json:"httpMaxRedirects,omitempty"`

	// HTTPMaxRequests is how many outbound HTTP requests the module may
	// have in flight at once on one host.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	HTTPMaxRequests *int32 `json:"httpMaxRequests,omitempty"`

	// KVMaxKeyBytes and KVMaxValueBytes bound a key and a value of the
	// module's key-value state (capability kv).
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	KVMaxKeyBytes *int32 `json:"kvMaxKeyBytes,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=524288
	KVMaxValueBytes *int32 `json:"kvMaxValueBytes,omitempty"`

	// KVMaxBytes bounds the module's bucket, over all its replicas; writes
	// past it fail with status quota.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	KVMaxBytes *int64 `json:"kvMaxBytes,omitempty"`

	// KVMaxListKeys is the most keys one listing of the module's keys
	// returns.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	KVMaxListKeys *int32 `json:"kvMaxListKeys,omitempty"`
}

// Capability names a host capability granted to a module: log, config,
// timer, messaging (every target), messaging:<module> or
// messaging:<module>/<component> (one target; each name a lower-case
// letter, then lower-case letters, digits, '-', '_' and '.', at most 63
// bytes), http:<host>, http:<host>:<port> or http:*.<domain> (outbound
// HTTP to a host: a lower-case DNS name or an IPv4 address), secret:<name>
// (one secret of the host), kv (the module's key-value state), or none,
// alone, for no capability at all.
//
// +kubebuilder:validation:MaxLength=270
// +kubebuilder:validation:XValidation:rule="self.matches('^(log|config|timer|messaging|kv|none|messaging:[a-z][a-z0-9._-]{0,62}(/[a-z][a-z0-9._-]{0,62})?|secret:[a-z][a-z0-9._-]{0,62}|http:([*][.])?[a-z0-9][a-z0-9.-]{0,252}(:[0-9]{1,5})?)$')",message="a capability is log, config, timer, messaging, messaging:<module>, messaging:<module>/<component> (names of a-z, 0-9, '-', '_', '.' starting with a letter, at most 63 bytes each), http:<host>, http:<host>:<port>, http:*.<domain>, secret:<name>, kv, or none"
type Capability string

// CapabilityNone, the list's only item, grants no capability: a TinyModule
// that omits capabilities gets the host's defaults instead.
const CapabilityNone Capability = "none"

// SecretRef gives the module's secret of Name the value of a key of a
// Secret in the TinyModule's namespace.
type SecretRef struct {
	// Name is the secret's name as the module reads it, and as
	// capabilities grants it (secret:<name>).
	//
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z][a-z0-9._-]{0,62}$')",message="secrets.name is a secret name of a host: a lower-case letter, then a-z, 0-9, '-', '_', '.', at most 63 bytes"
	Name string `json:"name"`

	// SecretKeyRef names the Secret, in the TinyModule's namespace, and
	// the key whose value the module gets.
	//
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// SecretKeySelector is a key of a Secret of the TinyModule's namespace;
// there is no namespace field on purpose.
type SecretKeySelector struct {
	// Name of the Secret.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="secretKeyRef.name must be a Secret's name: lower-case letters, digits, '-' and '.'"
	Name string `json:"name"`

	// Key in the Secret's data.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="secretKeyRef.key must be a Secret's key: letters, digits, '-', '_' and '.'"
	Key string `json:"key"`
}

// Wire connects an output port of the module to an input port of a module.
// Each name is a host name: a lower-case letter first, then lower-case
// letters, digits, '-', '_' and '.', at most 63 bytes. System ports (names
// starting with '_', such as _settings) are the host's: only the host
// delivers to them, so no wire may start or end at one.
type Wire struct {
	// From is the output port, as component/port.
	//
	// +required
	// +kubebuilder:validation:MaxLength=127
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z][a-z0-9._-]{0,62}/[a-z][a-z0-9._-]{0,62}$')",message="wiring.from must be component/port: names of a-z, 0-9, '-', '_', '.' starting with a letter, at most 63 bytes each; system ports (starting with '_') cannot be wired"
	From string `json:"from"`

	// To is the input port it feeds, as module/component/port: a module
	// of the TinyModule's namespace, or one the hosts provide.
	//
	// +required
	// +kubebuilder:validation:MaxLength=191
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z][a-z0-9._-]{0,62}/[a-z][a-z0-9._-]{0,62}/[a-z][a-z0-9._-]{0,62}$')",message="wiring.to must be module/component/port: names of a-z, 0-9, '-', '_', '.' starting with a letter, at most 63 bytes each; system ports (starting with '_') cannot be wired"
	To string `json:"to"`

	// Delivery of what is emitted on the wire: "at-most-once", the
	// default (bounded in flight, lost if the target's host stops or its
	// handler fails), or "at-least-once": stored before the emit returns,
	// delivered again with backoff until the handler succeeds, then kept
	// as a dead letter of the target module; the handler reads the
	// message's ID from its metadata (tinyhost-message-id) to drop
	// duplicates. Needs hosts with a state store.
	//
	// +optional
	// +kubebuilder:validation:Enum=at-most-once;at-least-once
	Delivery string `json:"delivery,omitempty"`
}

// TinyModuleStatus is where the module runs and what it is. Address, Version
// and Components are the fields the Tiny Systems docs publish for module
// discovery, with the same names and shapes.
type TinyModuleStatus struct {
	// Address is the gRPC address of the module while a replica is ready:
	// its Service's, name.namespace.svc:50051, a Service without selector
	// of the module's name whose EndpointSlices list the ready placements'
	// addresses. When the module's name cannot name a Service, or a
	// Service of that name is not the module's, it is a ready host's
	// host:port instead. Hosts route to placements, not to this address.
	//
	// +optional
	Address string `json:"address,omitempty"`

	// Version is the module's version, from its descriptor.
	//
	// +optional
	Version string `json:"version,omitempty"`

	// Components are the module's components, from its descriptor.
	//
	// +optional
	// +listType=atomic
	Components []ComponentStatus `json:"components,omitempty"`

	// State sums up the conditions in one word.
	//
	// +optional
	State ModuleState `json:"state,omitempty"`

	// Replicas is how many hosts the module is placed on.
	//
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is how many of them have it loaded and serving.
	//
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// UpdatedReplicas is how many of them are Ready with the current spec;
	// during a rollout the others still run the previous one.
	//
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// Selector is the label selector of the /scale subresource, which
	// `kubectl scale` and a HorizontalPodAutoscaler read: it selects the
	// module's EndpointSlices (kubernetes.io/service-name=<name>), whose
	// endpoints are its Ready placements.
	//
	// +optional
	Selector string `json:"selector,omitempty"`

	// Placements are the hosts the module is placed on, one entry per host.
	// Written whole by the operator alone (atomic: the apiserver tracks no
	// owner per entry).
	//
	// +optional
	// +listType=atomic
	Placements []Placement `json:"placements,omitempty"`

	// ObservedGeneration is the metadata.generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// AppliedGeneration is the last metadata.generation whose spec every
	// replica ran, ready (the module was Ready for it).
	//
	// +optional
	AppliedGeneration int64 `json:"appliedGeneration,omitempty"`

	// LastObservedAt is when the operator last looked at the module and
	// wrote its status: when the status changed, and at least once a
	// resync period (--resync-period) while the module is looked at.
	//
	// +optional
	LastObservedAt *metav1.Time `json:"lastObservedAt,omitempty"`

	// LastAppliedAt is when the module last became Ready: for a new
	// generation, or after a replica moved or was reloaded.
	//
	// +optional
	LastAppliedAt *metav1.Time `json:"lastAppliedAt,omitempty"`

	// Inventory is what was applied where, one item per placement: the
	// host, the digest of the wasm it runs, and the phase. Written whole by
	// the operator alone (atomic).
	//
	// +optional
	// +listType=atomic
	Inventory []InventoryItem `json:"inventory,omitempty"`

	// DeadLetters is how many of the module's messages sent at least once
	// failed every attempt and wait in its dead-letter stream, as a Ready
	// host of the module counted them from the durable store, asked once a
	// resync period (--resync-period). Absent when the module runs on no
	// host with a durable store (--state-dir or --nats-url); when the host
	// asked does not answer, the last known count stays (condition
	// DeadLetters, reason CountStale).
	//
	// +optional
	DeadLetters *int64 `json:"deadLetters,omitempty"`

	// Conditions: Scheduled, Ready, Degraded, Wired when the module has
	// wiring, and DeadLetters when its hosts keep a durable store.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// InventoryItem is the module on one host, as component-operator-runtime
// keeps its inventory of what it applied.
type InventoryItem struct {
	// Host is the TinyHost's name.
	Host string `json:"host"`

	// Digest is "sha256:" and the hex digest of the wasm the host runs.
	//
	// +optional
	Digest string `json:"digest,omitempty"`

	// Phase of the module on the host.
	Phase Phase `json:"phase"`
}

// ComponentStatus is one component of a module, as the Tiny Systems docs
// publish it.
type ComponentStatus struct {
	Name string        `json:"name"`
	Info ComponentInfo `json:"info"`
	// Ports are the component's ports as its descriptor declares them,
	// with their JSON schemas, so that tools can wire modules without
	// loading them.
	//
	// +optional
	// +listType=atomic
	Ports []PortStatus `json:"ports,omitempty"`
}

// PortStatus is one port of a component.
type PortStatus struct {
	Name string `json:"name"`
	// Direction is input or output.
	Direction string `json:"direction"`
	// Schema is the JSON schema of the port's payload, the JSON text the
	// descriptor holds; absent when the port declares none, or when it
	// did not fit (SchemaOmitted).
	//
	// +optional
	Schema string `json:"schema,omitempty"`
	// SchemaOmitted says the port has a schema that the status leaves out:
	// the module's schemas together are larger than the operator's bound
	// (tinyhost-operator --max-status-schema-bytes), which keeps the
	// TinyModule well below the apiserver's object size. Its descriptor
	// (ListModules of a host that loaded it) has them all.
	//
	// +optional
	SchemaOmitted bool `json:"schemaOmitted,omitempty"`
}

// ComponentInfo describes a component for people and tools.
type ComponentInfo struct {
	// +optional
	Description string `json:"description,omitempty"`
	// +optional
	// +listType=atomic
	Tags []string `json:"tags,omitempty"`
}

// Placement is the module on one host.
type Placement struct {
	// Host is the TinyHost's name.
	Host string `json:"host"`

	// Address is the host's gRPC address (host:port).
	//
	// +optional
	Address string `json:"address,omitempty"`

	// Phase of the module on the host.
	Phase Phase `json:"phase"`

	// Artifact is the image reference or URL chosen for this host.
	//
	// +optional
	Artifact string `json:"artifact,omitempty"`

	// Digest is "sha256:" and the hex digest of the wasm the host loaded.
	//
	// +optional
	Digest string `json:"digest,omitempty"`

	// SpecHash identifies the spec the host is to run here (artifact,
	// limits, capabilities, config): during a rollout, a replica not yet
	// updated keeps the previous one.
	//
	// +optional
	SpecHash string `json:"specHash,omitempty"`

	// Message says why the phase is what it is, when that needs saying.
	//
	// +optional
	Message string `json:"message,omitempty"`

	// LastTransitionTime is when Phase last changed.
	//
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ModuleState sums up a TinyModule's conditions.
//
// +kubebuilder:validation:Enum=Pending;Unschedulable;Progressing;Ready;Degraded;Failed
type ModuleState string

const (
	// StatePending: placed, and sent to no host yet; for a module a host
	// provides, that host is not ready or has not reported it yet.
	StatePending ModuleState = "Pending"
	// StateUnschedulable: no host, or too few, can run the module.
	StateUnschedulable ModuleState = "Unschedulable"
	// StateProgressing: placed, and loading or upgrading on some hosts, or
	// ready on some and not yet sent to others.
	StateProgressing ModuleState = "Progressing"
	// StateReady: every replica is loaded and serving.
	StateReady ModuleState = "Ready"
	// StateDegraded: some replicas serve, others failed.
	StateDegraded ModuleState = "Degraded"
	// StateFailed: no replica serves, because of the spec or the artifact.
	StateFailed ModuleState = "Failed"
)

// Phase is where a module stands on one host.
//
// +kubebuilder:validation:Enum=Pending;Loading;Ready;Draining;Failed;Unloading;Unmanaged
type Phase string

const (
	// PhasePending: placed on the host, not yet sent to it.
	PhasePending Phase = "Pending"
	// PhaseLoading: the host is fetching, compiling or upgrading it.
	PhaseLoading Phase = "Loading"
	// PhaseReady: loaded and serving.
	PhaseReady Phase = "Ready"
	// PhaseDraining: the module is leaving the host (cordoned, no longer
	// selected, moved) and serves there, routed, until its replacement
	// elsewhere is Ready; then it becomes Unloading.
	PhaseDraining Phase = "Draining"
	// PhaseFailed: the host refused or lost it; Message says why.
	PhaseFailed Phase = "Failed"
	// PhaseUnloading: no longer placed there, being unloaded: every
	// host's routes leave it out, and the host unloads it once no host's
	// route table names it there any more.
	PhaseUnloading Phase = "Unloading"
	// PhaseUnmanaged: loaded by the host on its own (from its modules
	// directory, or a load not the operator's), not by the operator, which
	// never unloads it. Only in TinyHost status. A host that registers
	// itself publishes such a module as a TinyModule with spec.providedBy.
	PhaseUnmanaged Phase = "Unmanaged"
)

// Condition types of a TinyModule.
const (
	// ConditionScheduled is True when every replica is placed on a host.
	ConditionScheduled = "Scheduled"
	// ConditionReady is True when every replica is loaded and serving.
	ConditionReady = "Ready"
	// ConditionDegraded is True when a replica failed or a placed host is
	// not ready, and (reason NameConflict) when a host runs a module of
	// the same name on its own.
	ConditionDegraded = "Degraded"
	// ConditionWired is False (reason InvalidWire) when hosts would refuse
	// some of spec.wiring, which is then left out of every host's wiring
	// and named in the message; True when every host that runs the
	// module accepted a wiring with each of its wires (else False,
	// NotDelivered, naming the host and its answer). Absent without
	// wiring.
	ConditionWired = "Wired"
	// ConditionDeadLetters is True (reason Present) when the module has
	// dead letters (status.deadLetters), the message counting them and
	// naming `tinyctl deadletters list`; False (reason None) when it has
	// none; reason CountStale, status unchanged, when the host asked did
	// not answer. Absent when the module's hosts keep no durable store.
	ConditionDeadLetters = "DeadLetters"
)

// Condition reasons shared by the controllers.
const (
	// ReasonInvalidSpec: the spec passed the schema but cannot be acted on
	// (e.g. a host version regexp that does not compile). The message says
	// what to fix.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonUnschedulable: too few hosts pass the filters; the message counts
	// why, per filter.
	ReasonUnschedulable = "Unschedulable"
	// ReasonScheduled: every replica has a host.
	ReasonScheduled = "Scheduled"
	// ReasonNameConflict: a TinyModule of the same name in another namespace
	// came first, or a host runs a module of that name on its own; module
	// names are global across hosts.
	ReasonNameConflict = "NameConflict"
)
