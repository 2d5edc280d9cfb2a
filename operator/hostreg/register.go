// Package hostreg makes a tinyhost process known to a Kubernetes cluster
// (tinyhost --register): it keeps the host's TinyHost (spec.address and the
// labels the host owns, never status) and renews a coordination.k8s.io
// Lease named after the host, the heartbeat the operator trusts beside its
// probes. On Stop it deletes what it created.
//
// Registration never stops the host from serving: every call to the
// apiserver is retried with backoff, and each failure is logged.
//
// It lives beside the operator's API, whose objects it writes, and is the
// only package through which the host daemon links Kubernetes. It reads
// the host through plain values (Host), so that it links nothing of the
// host and the host nothing of it.
package hostreg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// FieldManager owns what the host writes into its TinyHost (server-side
// apply): spec.address and its labels. Labels others set are left alone;
// a label the host stops setting is removed.
const FieldManager = "tinyhost"

// DefaultNamespace is where the host's Lease lives when it runs outside a
// pod and no namespace is given.
const DefaultNamespace = "tinyhost-system"

// Defaults of Options.
const (
	DefaultLeaseDuration = 3 * time.Second
	DefaultRenewInterval = time.Second
	DefaultResync        = 30 * time.Second
)

// serviceAccountNamespace is the file that names a pod's namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ErrNoConfig: --register without --kubeconfig, outside a pod.
var ErrNoConfig = errors.New("register: no --kubeconfig and no in-cluster configuration (not in a pod?)")

// Options configure a Registrar.
type Options struct {
	// Config reaches the apiserver; see RESTConfig.
	Config *rest.Config
	// Name is the TinyHost's and the Lease's name, a DNS subdomain.
	Name string
	// Address is spec.address, host:port.
	Address string
	// Labels are the TinyHost labels the host owns.
	Labels map[string]string
	// Namespace holds the Lease. Default: the pod's namespace, else
	// DefaultNamespace.
	Namespace string
	// LeaseDuration is the Lease's leaseDurationSeconds, whole seconds;
	// RenewInterval how often it is renewed. Defaults 3s and 1s.
	LeaseDuration, RenewInterval time.Duration
	// Resync is how often the TinyHost is applied again, so that one
	// deleted by hand comes back. Default 30s.
	Resync time.Duration
	// Logger; default: none.
	Logger hclog.Logger
}

// RESTConfig is the configuration of the apiserver: from the kubeconfig
// file when one is named, else the pod's (in-cluster).
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("register: kubeconfig %s: %w", kubeconfig, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoConfig, err)
	}
	return c, nil
}

// PodNamespace is the namespace of the pod the process runs in, or
// DefaultNamespace outside a pod.
func PodNamespace() string {
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return DefaultNamespace
}

func (o Options) withDefaults() (Options, error) {
	if o.Config == nil {
		return o, errors.New("register: no Config")
	}
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		return o, fmt.Errorf("register: name %q cannot name a TinyHost: %s", o.Name, strings.Join(errs, "; "))
	}
	if _, port, err := net.SplitHostPort(o.Address); err != nil || port == "0" {
		return o, fmt.Errorf("register: address %q is not host:port", o.Address)
	}
	if o.Namespace == "" {
		o.Namespace = PodNamespace()
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = DefaultRenewInterval
	}
	if o.Resync == 0 {
		o.Resync = DefaultResync
	}
	if o.LeaseDuration < time.Second || o.LeaseDuration%time.Second != 0 {
		return o, fmt.Errorf("register: lease duration %v must be whole seconds, at least 1s", o.LeaseDuration)
	}
	if o.RenewInterval <= 0 || o.RenewInterval >= o.LeaseDuration {
		return o, fmt.Errorf("register: renew interval %v must be positive and below the lease duration %v", o.RenewInterval, o.LeaseDuration)
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o, nil
}

// Registrar keeps one host registered until Stop.
type Registrar struct {
	o      Options
	c      client.Client
	log    hclog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	// parts run once the TinyHost exists, until Stop.
	parts []func(ctx context.Context)

	mu    sync.Mutex
	owner *metav1.OwnerReference // the TinyHost, once registered

	lease *coordinationv1.Lease // as last written; the heartbeat's own
}

// New checks the options and makes the client; nothing is sent before
// Start.
func New(o Options) (*Registrar, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(o.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("register: client: %w", err)
	}
	return &Registrar{o: o, c: c, log: o.Logger, done: make(chan struct{})}, nil
}

// Namespace is the namespace of the host's Lease and TinyModules.
func (r *Registrar) Namespace() string { return r.o.Namespace }

// Start registers the host in the background: it applies the TinyHost
// (retrying with backoff until it succeeds), then renews the Lease,
// publishes the modules h loads on its own as TinyModules (when h is not
// nil), and applies the TinyHost again every Resync.
func (r *Registrar) Start(h Host) {
	if h != nil {
		r.parts = append(r.parts, func(ctx context.Context) { r.publish(ctx, h) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.run(ctx)
	}()
}

func (r *Registrar) run(ctx context.Context) {
	if !retry(ctx, r.log, "register the TinyHost", r.apply) {
		return
	}
	r.log.Info("registered", "tinyhost", r.o.Name, "address", r.o.Address, "namespace", r.o.Namespace)
	var wg sync.WaitGroup
	for _, part := range append([]func(context.Context){r.heartbeat}, r.parts...) {
		wg.Go(func() { part(ctx) })
	}
	t := time.NewTicker(r.o.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			if err := r.apply(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("cannot apply the TinyHost; retrying", "error", err)
			}
		}
	}
}

// apply creates or updates the TinyHost with server-side apply: address
// and labels as the host has them; status is not the host's to write.
func (r *Registrar) apply(ctx context.Context) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("TinyHost"))
	u.SetName(r.o.Name)
	if len(r.o.Labels) > 0 {
		u.SetLabels(maps.Clone(r.o.Labels))
	}
	if err := unstructured.SetNestedField(u.Object, r.o.Address, "spec", "address"); err != nil {
		return err
	}
	err := r.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("apply TinyHost %s: %w", r.o.Name, err)
	}
	if u.GetDeletionTimestamp() != nil {
		// The operator is draining an earlier incarnation; once it is
		// gone the host is registered anew.
		return fmt.Errorf("TinyHost %s is being deleted", r.o.Name)
	}
	r.mu.Lock()
	r.owner = &metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TinyHost", Name: r.o.Name, UID: u.GetUID()}
	r.mu.Unlock()
	return nil
}

// ownerRef is the TinyHost as the owner of what the host creates, so
// that the garbage collector removes it with the TinyHost.
func (r *Registrar) ownerRef() metav1.OwnerReference {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *r.owner
}

// Stop stops registering and deletes the host's TinyModules, its TinyHost
// and its Lease, each within ctx. It returns what could not be deleted.
func (r *Registrar) Stop(ctx context.Context) error {
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	registered := r.owner != nil
	r.mu.Unlock()
	if !registered {
		return nil
	}
	var errs []error
	if err := r.deleteModules(ctx); err != nil {
		errs = append(errs, err)
	}
	uid := r.ownerRef().UID
	th := &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: r.o.Name}}
	if err := r.c.Delete(ctx, th, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		errs = append(errs, fmt.Errorf("delete TinyHost %s: %w", r.o.Name, err))
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.o.Namespace, Name: r.o.Name}}
	if err := r.c.Delete(ctx, lease); client.IgnoreNotFound(err) != nil {
		errs = append(errs, fmt.Errorf("delete Lease %s/%s: %w", r.o.Namespace, r.o.Name, err))
	}
	if len(errs) == 0 {
		r.log.Info("deregistered", "tinyhost", r.o.Name)
	}
	return errors.Join(errs...)
}

// retry calls f until it succeeds, with backoff from 200ms to 10s, and
// logs each failure. It returns false when ctx ended first.
func retry(ctx context.Context, log hclog.Logger, what string, f func(context.Context) error) bool {
	delay := 200 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		log.Warn("cannot "+what+"; the host serves regardless, retrying", "error", err, "in", delay)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay + rand.N(delay/5)):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// key is the name of the host's objects in its namespace.
func (r *Registrar) key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.o.Namespace, Name: r.o.Name}
}
