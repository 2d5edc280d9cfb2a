package hostreg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// Host is what the registrar reads of the host: the modules it has loaded,
// and word of each change. The daemon adapts its host to it.
type Host interface {
	// Modules are the modules the host runs now.
	Modules() []Module
	// Changes receives a value after the host's modules change, until ctx
	// ends; it is closed when ctx ends or the host closes. Changes that
	// come while one is pending may be merged into it.
	Changes(ctx context.Context) <-chan struct{}
}

// Module is a module the host runs, as far as registration cares.
type Module struct {
	Name string
	// Labels are those the module was loaded with; the operator's loads
	// carry v1alpha1.LabelModuleNamespace.
	Labels map[string]string
}

// retryDelay is how soon a failed publication of the modules is tried
// again.
const retryDelay = 2 * time.Second

// publish keeps one TinyModule, spec.providedBy this host, for each module
// the host loaded on its own, until ctx ends: at once, on every change of
// the host's modules, and every Resync. A Tiny Systems module creates its own
// TinyModule on startup; here the host does it for the modules it runs.
func (r *Registrar) publish(ctx context.Context, h Host) {
	changes := h.Changes(ctx)
	resync := time.NewTicker(r.o.Resync)
	defer resync.Stop()
	p := &publisher{r: r, h: h, said: map[string]string{}}
	full := true
	for {
		var retry <-chan time.Time
		if err := p.sync(ctx, full); err != nil && ctx.Err() == nil {
			p.say("", "cannot publish the host's modules as TinyModules; retrying", "error", err)
			retry = time.After(retryDelay)
		}
		full = false
		select {
		case <-ctx.Done():
			return
		case _, ok := <-changes:
			if !ok {
				changes = nil // the host closed
			}
			// One pass for a burst of changes (a directory of modules).
			for len(changes) > 0 {
				<-changes
			}
		case <-resync.C:
			full = true
		case <-retry:
			full = true
		}
	}
}

// publisher is publish's state: what it last logged about each module, so
// that a lasting condition is logged once.
type publisher struct {
	r    *Registrar
	h    Host
	said map[string]string
	// synced are the host's own modules at the last pass that succeeded;
	// nil before the first.
	synced map[string]bool
}

func (p *publisher) say(module, msg string, args ...any) {
	if p.said[module] == msg {
		return
	}
	p.said[module] = msg
	p.r.log.Warn(msg, append([]any{"module", module}, args...)...)
}

// sync creates the TinyModules of the host's own modules that lack one and
// deletes those of modules it no longer has. A module is the host's own
// unless it was loaded with the label v1alpha1.LabelModuleNamespace, as the
// operator loads its modules.
//
// Unless full, a pass whose own modules are those of the last pass that
// succeeded lists nothing: the loads the operator makes are changes too,
// and a list of every TinyModule of the namespace per load, per host, is
// what would load the apiserver most in a large cluster. Full passes (the
// first, each Resync, after a failure) list anyway, so that a TinyModule
// deleted or created by someone else is seen.
func (p *publisher) sync(ctx context.Context, full bool) error {
	r := p.r
	own := map[string]bool{}
	for _, m := range p.h.Modules() {
		if m.Labels[v1alpha1.LabelModuleNamespace] == "" {
			own[m.Name] = true
		}
	}
	if !full && p.synced != nil && maps.Equal(own, p.synced) {
		return nil
	}
	p.synced = nil
	var th v1alpha1.TinyHost
	if err := r.c.Get(ctx, client.ObjectKey{Name: r.o.Name}, &th); err != nil {
		return fmt.Errorf("get TinyHost %s: %w", r.o.Name, err)
	}
	var list v1alpha1.TinyModuleList
	if err := r.c.List(ctx, &list, client.InNamespace(r.o.Namespace)); err != nil {
		return fmt.Errorf("list TinyModules in %s: %w", r.o.Namespace, err)
	}
	mine, others := map[string]*v1alpha1.TinyModule{}, map[string]bool{}
	for i := range list.Items {
		if m := &list.Items[i]; m.Spec.ProvidedBy == r.o.Name {
			mine[m.Name] = m
		} else {
			others[m.Name] = true
		}
	}
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TinyHost", Name: th.Name, UID: th.UID}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(own)) {
		if mine[name] != nil {
			continue
		}
		if err := p.create(ctx, name, owner, others[name]); err != nil {
			errs = append(errs, err)
		}
	}
	for name, m := range mine {
		if own[name] {
			continue
		}
		if err := r.c.Delete(ctx, m, client.Preconditions{UID: &m.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete TinyModule %s/%s: %w", m.Namespace, name, err))
			continue
		}
		r.log.Info("module gone: TinyModule deleted", "module", name, "namespace", m.Namespace)
		delete(p.said, name)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	p.synced = own
	return nil
}

// create creates the module's TinyModule, owned by the TinyHost so that it
// goes with it. A name that cannot be a TinyModule's, or that another
// TinyModule of the namespace has, is logged once and left unpublished;
// the operator tells the owner of the other TinyModule (a condition and an
// Event).
func (p *publisher) create(ctx context.Context, name string, owner metav1.OwnerReference, taken bool) error {
	r := p.r
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || len(name) > 63 {
		if len(name) > 63 {
			errs = append(errs, "longer than 63 characters")
		}
		p.say(name, "module not published: its name cannot name a TinyModule", "reason", strings.Join(errs, "; "))
		return nil
	}
	clash := fmt.Sprintf("module not published: TinyModule %s/%s exists and is not this host's", r.o.Namespace, name)
	if taken {
		p.say(name, clash)
		return nil
	}
	m := &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.o.Namespace, Name: name, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec:       v1alpha1.TinyModuleSpec{ProvidedBy: r.o.Name},
	}
	err := r.c.Create(ctx, m)
	switch {
	case apierrors.IsAlreadyExists(err):
		p.say(name, clash)
		return nil
	case err != nil:
		return fmt.Errorf("create TinyModule %s/%s: %w", r.o.Namespace, name, err)
	}
	r.log.Info("module published as a TinyModule", "module", name, "namespace", r.o.Namespace)
	delete(p.said, name)
	return nil
}

// deleteModules deletes every TinyModule the host published.
func (r *Registrar) deleteModules(ctx context.Context) error {
	var list v1alpha1.TinyModuleList
	if err := r.c.List(ctx, &list, client.InNamespace(r.o.Namespace)); err != nil {
		return fmt.Errorf("list TinyModules in %s: %w", r.o.Namespace, err)
	}
	var errs []error
	for i := range list.Items {
		m := &list.Items[i]
		if m.Spec.ProvidedBy != r.o.Name {
			continue
		}
		if err := r.c.Delete(ctx, m, client.Preconditions{UID: &m.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete TinyModule %s/%s: %w", m.Namespace, m.Name, err))
		}
	}
	return errors.Join(errs...)
}
