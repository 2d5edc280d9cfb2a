// Package operator runs tinyhost on Kubernetes: it places the modules that
// TinyModules ask for onto the hosts that TinyHosts name, and publishes where
// they run. Setup adds it to a controller-runtime manager; the manager's
// leader election makes sure one operator acts at a time.
//
// A tour:
//
//   - api/v1alpha1: the TinyModule and TinyHost types, from which the
//     deepcopy code and the CRDs in config/crd are generated.
//   - internal/placement: which hosts run a module, as pure functions.
//   - internal/kubetest: a real kube-apiserver and etcd for tests.
//   - config: the manifests, for `kubectl apply -k config/default`.
//   - tools: the modules that build the envtest binaries.
package operator

import (
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/placement"
)

// The operator's permissions; `make manifests` writes them into
// config/rbac/role.yaml.
//
// +kubebuilder:rbac:groups=operator.tinysystems.io,resources=tinymodules;tinyhosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=operator.tinysystems.io,resources=tinymodules/status;tinyhosts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Options configure the operator. The zero value is usable: every zero field
// takes the default its comment names.
type Options struct {
	// ProbeInterval is how often each host is probed. Default 1s.
	ProbeInterval time.Duration
	// HostTimeout is how long a host may go unanswered before it is
	// NotReady and its modules are placed elsewhere. Default 5s.
	HostTimeout time.Duration
	// SpreadLabel is the TinyHost label whose values are failure domains.
	// Default placement.DefaultSpreadLabel.
	SpreadLabel string
}

func (o Options) withDefaults() (Options, error) {
	if o.ProbeInterval == 0 {
		o.ProbeInterval = time.Second
	}
	if o.HostTimeout == 0 {
		o.HostTimeout = 5 * time.Second
	}
	if o.SpreadLabel == "" {
		o.SpreadLabel = placement.DefaultSpreadLabel
	}
	if o.ProbeInterval < 0 || o.HostTimeout < 0 {
		return o, errors.New("operator: ProbeInterval and HostTimeout must not be negative")
	}
	if o.HostTimeout < o.ProbeInterval {
		return o, fmt.Errorf("operator: HostTimeout %v is shorter than ProbeInterval %v", o.HostTimeout, o.ProbeInterval)
	}
	return o, nil
}

// Setup adds the operator to the manager. The manager's scheme must know
// the v1alpha1 types (v1alpha1.AddToScheme).
func Setup(mgr manager.Manager, o Options) error {
	if _, err := o.withDefaults(); err != nil {
		return err
	}
	gvk := v1alpha1.GroupVersion.WithKind("TinyModule")
	if !mgr.GetScheme().Recognizes(gvk) {
		return fmt.Errorf("operator: the manager's scheme does not know %s: add v1alpha1.AddToScheme", gvk)
	}
	// The placement, host sync and status controllers are added here once
	// the host gRPC API has SetRoutes (see operator/README.md).
	return nil
}
