package shard

import (
	"context"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// releaseTimeout bounds the write that releases a Lease.
const releaseTimeout = 5 * time.Second

// acquire writes this replica into the Lease name (cur as the cache has
// it, nil for none) and, when it did, owns the shard and brings back its
// objects. A conflict is another replica that was faster.
func (s *Set) acquire(ctx context.Context, kind, target, name string, cur *coordinationv1.Lease, member bool) bool {
	start := time.Now()
	now := metav1.NewMicroTime(start)
	l := &coordinationv1.Lease{}
	if cur != nil {
		l = cur.DeepCopy()
		if Holder(l) != s.o.Identity {
			l.Spec.LeaseTransitions = ptr(ptrValue(l.Spec.LeaseTransitions) + 1)
		}
	} else {
		l.Namespace, l.Name = s.o.Namespace, name
		l.Labels = map[string]string{Label: kind}
		l.Annotations = map[string]string{Label: target}
	}
	l.Spec.HolderIdentity = ptr(s.o.Identity)
	l.Spec.LeaseDurationSeconds = ptr(int32(s.o.LeaseDuration / time.Second))
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	var err error
	if cur == nil {
		err = s.c.Create(ctx, l)
	} else {
		err = s.c.Update(ctx, l)
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			logf.FromContext(ctx).Info("shard Lease not taken", "lease", name, "error", err.Error())
		}
		return false
	}
	sh := &shard{kind: kind, target: target, lease: l, renewed: start}
	sh.ctx, sh.cancel = context.WithCancel(context.Background())
	sh.deadline = time.AfterFunc(time.Until(start.Add(s.o.RenewDeadline)), sh.cancel)
	s.mu.Lock()
	s.held[name] = sh
	s.mu.Unlock()
	if !member {
		logf.FromContext(ctx).Info("shard acquired", "kind", kind, "target", target)
		go s.bringBack(ctx, kind, target)
	}
	return true
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// renew renews the Leases held whose last renewal started a third of the
// renew deadline ago or more: the other two thirds leave room to retry,
// every retry period, before the deadline ends the shard. A Lease another replica
// changed (a conflict) or deleted is lost at once.
func (s *Set) renew(ctx context.Context) {
	s.mu.Lock()
	var due []string
	for name, sh := range s.held {
		if !sh.releasing && sh.ctx.Err() == nil && time.Since(sh.renewed) >= s.o.RenewDeadline/3 {
			due = append(due, name)
		}
	}
	s.mu.Unlock()
	for _, name := range due {
		s.mu.Lock()
		sh := s.held[name]
		if sh == nil || sh.releasing {
			s.mu.Unlock()
			continue
		}
		l := sh.lease.DeepCopy()
		s.mu.Unlock()
		start := time.Now()
		l.Spec.RenewTime = ptr(metav1.NewMicroTime(start))
		err := s.c.Update(ctx, l)
		s.mu.Lock()
		switch {
		case err == nil && sh.ctx.Err() == nil:
			sh.lease, sh.renewed = l, start
			sh.deadline.Reset(time.Until(start.Add(s.o.RenewDeadline)))
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			sh.cancel()
		case err != nil:
			logf.FromContext(ctx).Info("shard Lease not renewed; retrying", "lease", name, "error", err.Error())
		}
		s.mu.Unlock()
	}
}

// dropLost forgets the shards whose context ended (lost, or not renewed
// by the deadline), once their last reconcile returned. Their Leases are
// another replica's, or expire.
func (s *Set) dropLost() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, sh := range s.held {
		if sh.releasing || sh.ctx.Err() == nil {
			continue
		}
		sh.releasing = true
		go func() {
			sh.inflight.Wait()
			s.gone(sh)
			s.mu.Lock()
			delete(s.held, name)
			s.mu.Unlock()
		}()
	}
}

// releaseLocked releases a shard (s.mu held): no reconcile of it starts
// any more; once those under way returned, its Lease is given up (deleted
// when del), for another replica to take at once.
func (s *Set) releaseLocked(name string, sh *shard, del bool) {
	sh.releasing = true
	go func() {
		sh.inflight.Wait()
		s.giveUp(name, sh, del)
	}()
}

// giveUp ends the shard and clears or deletes its Lease.
func (s *Set) giveUp(name string, sh *shard, del bool) {
	sh.deadline.Stop()
	live := sh.ctx.Err() == nil
	sh.cancel()
	s.gone(sh)
	if live {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		s.mu.Lock()
		l := sh.lease.DeepCopy()
		s.mu.Unlock()
		var err error
		if del {
			err = s.c.Delete(ctx, l, client.Preconditions{ResourceVersion: &l.ResourceVersion})
		} else {
			l.Spec.HolderIdentity = nil
			err = s.c.Update(ctx, l)
		}
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			logf.Log.WithName("shards").Info("shard Lease not released; it expires", "lease", name, "error", err.Error())
		}
	}
	s.mu.Lock()
	delete(s.held, name)
	s.mu.Unlock()
}

// gone tells the host sync that a host's shard ended.
func (s *Set) gone(sh *shard) {
	if sh.kind == kindHost && s.hostLost != nil {
		s.hostLost(sh.target)
	}
}

// releaseAll releases every Lease held, as the manager stops.
func (s *Set) releaseAll() {
	s.mu.Lock()
	type held struct {
		name string
		sh   *shard
	}
	var all []held
	for name, sh := range s.held {
		if !sh.releasing {
			sh.releasing = true
			all = append(all, held{name, sh})
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		for _, h := range all {
			h.sh.inflight.Wait()
		}
		for _, h := range all {
			s.giveUp(h.name, h.sh, false)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(s.o.RenewDeadline):
		// What is not released by now expires.
	}
}

// bringBack enqueues the objects of a shard just acquired: its host, or
// the modules of its bucket.
func (s *Set) bringBack(ctx context.Context, kind, target string) {
	send := func(ch chan event.GenericEvent, obj client.Object) {
		select {
		case ch <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
		}
	}
	if kind == kindHost {
		send(s.hostEvents, &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: target}})
		return
	}
	b, _ := strconv.Atoi(target)
	var mods v1alpha1.TinyModuleList
	if err := s.objects.List(ctx, &mods, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	for _, m := range mods.Items {
		if ModuleBucket(m.Namespace, m.Name) == b {
			obj := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
			send(s.moduleEvents, obj)
			send(s.serviceEvents, obj)
		}
	}
}

// hold is how a reconcile of the shard named by the Lease name starts:
// ok is false when this replica does not own it (or is releasing it);
// else ctx ends with the shard, and done must be called when the
// reconcile returns.
func (s *Set) hold(ctx context.Context, name string) (context.Context, func(), bool) {
	s.mu.Lock()
	sh := s.held[name]
	if sh == nil || sh.releasing || sh.ctx.Err() != nil {
		s.mu.Unlock()
		return nil, nil, false
	}
	sh.inflight.Add(1)
	s.mu.Unlock()
	rctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(sh.ctx, cancel)
	return rctx, func() { stop(); cancel(); sh.inflight.Done() }, true
}

// HoldHost is hold for the host's shard, for work on the host that is not
// a reconcile.
func (s *Set) HoldHost(ctx context.Context, host string) (context.Context, func(), bool) {
	return s.hold(ctx, HostLease(host))
}

// owns reports whether this replica owns the shard of the Lease name now.
func (s *Set) owns(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.held[name]
	return sh != nil && !sh.releasing && sh.ctx.Err() == nil
}

// Holder is the Lease's holderIdentity, "" for none.
func Holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// Expiry is when the Lease expires: its renewTime (or acquireTime) plus
// its duration. A Lease without them has expired. The operator reads the
// hosts' own Leases by the same rule.
func Expiry(l *coordinationv1.Lease) time.Time {
	t := l.Spec.RenewTime
	if t == nil {
		t = l.Spec.AcquireTime
	}
	if t == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return t.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

func ptr[T any](v T) *T { return &v }
