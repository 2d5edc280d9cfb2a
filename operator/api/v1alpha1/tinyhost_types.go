package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostapi "github.com/tinyhost/tinyhost/host/api"
)

// TinyHost is one tinyhost host process. Its labels are what TinyModule
// hostSelectors select; its status is what the operator last learned from
// the host over gRPC. Hosts that register themselves (tinyhost --register)
// create and delete their own TinyHost, and renew a Lease of its name in
// their namespace that the operator trusts beside its probes; a host
// outside the cluster may be registered by creating one by hand.
//
// TinyHosts are cluster-scoped, like Nodes: a host serves TinyModules of
// every namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=th,categories=tinysystems
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Modules",type=integer,JSONPath=`.status.allocated.modules`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`,priority=1
// +kubebuilder:printcolumn:name="ABI",type=string,JSONPath=`.status.abiVersions`,priority=1
// +kubebuilder:printcolumn:name="Unschedulable",type=boolean,JSONPath=`.spec.unschedulable`,priority=1
type TinyHost struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TinyHostSpec `json:"spec"`
	// +optional
	Status TinyHostStatus `json:"status,omitempty"`
}

// TinyHostList is a list of TinyHosts.
//
// +kubebuilder:object:root=true
type TinyHostList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TinyHost `json:"items"`
}

// TinyHostSpec says where the host is and how it may be used.
type TinyHostSpec struct {
	// Address is the host's gRPC address, host:port, reachable from the
	// operator and from every other host.
	//
	// +required
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[^\\\\s/]+:[0-9]{1,5}$')",message="address must be host:port"
	Address string `json:"address"`

	// Unschedulable cordons and drains the host: no new modules go there,
	// and each module placed there moves to another host that can take it,
	// Ready there before it leaves this one (make-before-break); a module
	// no other host can take stays.
	//
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`

	// Capacity caps what the operator places on the host, below what the
	// host reports. Absent fields leave the host's own numbers.
	//
	// +optional
	Capacity *HostResources `json:"capacity,omitempty"`
}

// HostResources counts what a host offers or has in use. An absent field is
// no limit in a capacity and unknown in an allocation.
type HostResources struct {
	// Modules is a number of modules.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Modules *int32 `json:"modules,omitempty"`

	// Memory is guest linear memory: what the pools of the modules may grow
	// to.
	//
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// TinyHostStatus is what the operator last learned from the host.
type TinyHostStatus struct {
	// HostName is the name the host reports for itself.
	//
	// +optional
	HostName string `json:"hostName,omitempty"`

	// Version is the host's build version; host mappings match it.
	//
	// +optional
	Version string `json:"version,omitempty"`

	// ABIVersions are the guest ABI versions the host loads; host mappings
	// match them.
	//
	// +optional
	// +listType=set
	ABIVersions []int32 `json:"abiVersions,omitempty"`

	// Capacity is what the host offers: its own numbers, capped by
	// spec.capacity.
	//
	// +optional
	Capacity *HostResources `json:"capacity,omitempty"`

	// Allocated is what the modules loaded on the host take of its
	// capacity, as placement counts it: the modules, and the memory of
	// their warm instances (memoryPages × minInstances of each). Instances
	// beyond those come and go with the calls, and are not counted here:
	// the host admits them against what is left.
	//
	// +optional
	Allocated *HostResources `json:"allocated,omitempty"`

	// Modules are the modules on the host: each placed module, whether or
	// not it is loaded yet (desired), with what the host has loaded for it
	// (actual), and each module the host loaded on its own. One entry per
	// name. Written whole by the operator alone (atomic: the apiserver
	// tracks no owner per entry).
	//
	// +optional
	// +listType=atomic
	Modules []HostModule `json:"modules,omitempty"`

	// LastProbeTime is when the operator last heard from the host.
	//
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`

	// ObservedGeneration is the metadata.generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// The labels the operator loads a TinyModule's module with (the host's
// LoadHeader.labels), which the host returns with what it lists: they say
// which modules of a host are the operator's, for which TinyModule spec,
// whatever the TinyHost's status says yet. A module without
// LabelModuleNamespace is the host's own.
const (
	// LabelModuleNamespace is the namespace of the TinyModule loaded,
	// the host's own label of a module's namespace (api.LabelNamespace):
	// the host refuses a guest's message to a module of another
	// namespace. A module provided by a host (spec.providedBy) is the
	// host's own, without it, and any namespace's modules may message it.
	LabelModuleNamespace = hostapi.LabelNamespace
	// LabelSpecHash is the TinyModule's spec hash the module was loaded
	// for (HostModule.SpecHash).
	LabelSpecHash = "operator.tinysystems.io/spec-hash"
)

// HostModule is one module on a host, desired and actual.
type HostModule struct {
	// Name is the module's name on the host.
	Name string `json:"name"`

	// Namespace is the namespace of the TinyModule placed here; empty for a
	// module the host loaded on its own.
	//
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Phase of the module on the host.
	Phase Phase `json:"phase"`

	// Artifact is the image reference or URL the placement asks for
	// (desired).
	//
	// +optional
	Artifact string `json:"artifact,omitempty"`

	// SpecHash identifies what the module is loaded with: artifact, limits,
	// capabilities, configuration and wiring. The operator reloads the
	// module when the TinyModule's hash differs, and never twice for one
	// hash, across restarts too.
	//
	// +optional
	SpecHash string `json:"specHash,omitempty"`

	// Digest is "sha256:" and the hex digest of the wasm loaded (actual).
	//
	// +optional
	Digest string `json:"digest,omitempty"`

	// Version is the loaded module's version (actual).
	//
	// +optional
	Version string `json:"version,omitempty"`

	// ABIVersion is the ABI the loaded module speaks (actual).
	//
	// +optional
	ABIVersion int32 `json:"abiVersion,omitempty"`

	// LoadedAt is when the host loaded this version.
	//
	// +optional
	LoadedAt *metav1.Time `json:"loadedAt,omitempty"`

	// Message says why a load failed.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// Condition types of a TinyHost.
const (
	// ConditionHostReady is True while the host answers its probes and,
	// for a host that renews a Lease, while its Lease has not expired
	// (reason LeaseExpired the moment it has).
	ConditionHostReady = "Ready"
)
