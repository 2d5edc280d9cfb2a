package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// Secrets (spec.secrets). The operator caches no Secret's data: it
// watches Secrets by their metadata only, to learn which changed, and
// reads the values of the Secrets a module names, in the module's
// namespace, from the apiserver when it loads the module (loading.go) and
// when one of them changes (secretPush). The values go to the host with
// the load and by SetSecrets, over the operator's TLS connection; no
// error, log line, event or status names more than a Secret and a key.

// indexSecret indexes TinyModules by the Secrets their spec.secrets name.
const indexSecret = "spec.secrets.secretKeyRef.name"

// secretNames are the Secrets the module names, each once.
func secretNames(m *v1alpha1.TinyModule) []string {
	var out []string
	for _, s := range m.Spec.Secrets {
		if !slices.Contains(out, s.SecretKeyRef.Name) {
			out = append(out, s.SecretKeyRef.Name)
		}
	}
	return out
}

// secretValues reads the values of the module's spec.secrets from the
// Secrets of its namespace, by r (the apiserver). A Secret or key that
// does not exist is an error naming it.
func secretValues(ctx context.Context, r client.Reader, m *v1alpha1.TinyModule) (map[string][]byte, error) {
	if len(m.Spec.Secrets) == 0 {
		return nil, nil
	}
	got := map[string]*corev1.Secret{}
	out := make(map[string][]byte, len(m.Spec.Secrets))
	for _, ref := range m.Spec.Secrets {
		name := ref.SecretKeyRef.Name
		s, ok := got[name]
		if !ok {
			s = &corev1.Secret{}
			// Only the module's own namespace: spec.secrets has no other.
			switch err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: name}, s); {
			case apierrors.IsNotFound(err):
				return nil, fmt.Errorf("secret %q: Secret %s/%s does not exist", ref.Name, m.Namespace, name)
			case err != nil:
				return nil, fmt.Errorf("secret %q: Secret %s/%s: %w", ref.Name, m.Namespace, name, err)
			}
			got[name] = s
		}
		v, ok := s.Data[ref.SecretKeyRef.Key]
		if !ok {
			return nil, fmt.Errorf("secret %q: Secret %s/%s has no key %q", ref.Name, m.Namespace, name, ref.SecretKeyRef.Key)
		}
		out[ref.Name] = v
	}
	return out, nil
}

// secretPush delivers a module's secret values to the hosts that serve it
// (SetSecrets) when a Secret it names or the module changes, and at every
// resync, so that a rotated Secret reaches the module without a reload,
// and a value read by a load that raced a rotation is set right by the
// module's next status change. Every operator replica pushes to the hosts
// it holds connections to, so sharding needs no gate here. A module whose
// Secrets now resolve and that waits to load somewhere brings those hosts
// back, rather than wait for the retry's backoff.
type secretPush struct {
	client.Client
	api    client.Reader
	hosts  *hosts
	resync time.Duration
}

func (r *secretPush) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m v1alpha1.TinyModule
	if err := r.Get(ctx, req.NamespacedName, &m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(m.Spec.Secrets) == 0 || m.Spec.ProvidedBy != "" || !m.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	vals, err := secretValues(ctx, r.api, &m)
	if err != nil {
		// The load reports it, in the placement and the Ready condition.
		logf.FromContext(ctx).V(1).Info("secrets of the module do not resolve", "module", m.Name, "error", err.Error())
		return ctrl.Result{RequeueAfter: r.resync}, nil
	}
	var errs []error
	for _, p := range m.Status.Placements {
		c := r.hosts.get(p.Host)
		if c == nil || !c.state().Ready {
			continue
		}
		switch p.Phase {
		case v1alpha1.PhasePending, v1alpha1.PhaseLoading:
			if p.Message != "" {
				r.hosts.notify(ctx, r.hosts.events, p.Host)
			}
			continue
		case v1alpha1.PhaseReady, v1alpha1.PhaseDraining:
		default:
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, listTimeout)
		err := c.client.SetSecrets(sctx, m.Name, vals)
		cancel()
		if err != nil && !errors.Is(err, api.ErrNotFound) {
			errs = append(errs, fmt.Errorf("host %s: set secrets of %s: %w", p.Host, m.Name, err))
		}
	}
	return ctrl.Result{RequeueAfter: r.resync}, errors.Join(errs...)
}

// modulesOf are the TinyModules of the Secret's namespace that name it.
func (r *secretPush) modulesOf(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.TinyModuleList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexSecret: obj.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, moduleKey(m.Namespace, m.Name))
	}
	return out
}

// setupSecrets indexes TinyModules by their Secrets and adds secretPush,
// which watches Secrets by their metadata only.
func setupSecrets(mgr ctrl.Manager, o Options, hs *hosts) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.TinyModule{}, indexSecret, func(obj client.Object) []string {
		return secretNames(obj.(*v1alpha1.TinyModule))
	}); err != nil {
		return err
	}
	r := &secretPush{Client: mgr.GetClient(), api: mgr.GetAPIReader(), hosts: hs, resync: o.Resync}
	withSecrets := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		m, ok := obj.(*v1alpha1.TinyModule)
		return ok && len(m.Spec.Secrets) > 0
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("tinymodule-secrets").
		For(&v1alpha1.TinyModule{}, builder.WithPredicates(withSecrets)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.modulesOf)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}
