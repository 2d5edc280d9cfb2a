package hostreg

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// heartbeat renews the host's Lease every RenewInterval until ctx ends, as
// a kubelet renews its node's: the operator takes a Lease not renewed for
// its leaseDurationSeconds as the host being gone. A failed renewal is
// logged once until one succeeds again.
func (r *Registrar) heartbeat(ctx context.Context) {
	t := time.NewTicker(r.o.RenewInterval)
	defer t.Stop()
	failing := false
	for {
		rctx, cancel := context.WithTimeout(ctx, r.o.RenewInterval)
		err := r.renew(rctx, time.Now())
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			r.log.Warn("cannot renew the Lease; retrying every renew interval", "error", err, "interval", r.o.RenewInterval)
		case err == nil && failing:
			r.log.Info("Lease renewed again", "lease", r.key().String())
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renew writes the Lease with renewTime now: an update of the copy last
// written, or, when there is none or it is out of date, a get and then a
// create or update.
func (r *Registrar) renew(ctx context.Context, now time.Time) error {
	mt := metav1.NewMicroTime(now)
	seconds := int32(r.o.LeaseDuration / time.Second)
	owner := r.ownerRef()
	if r.lease == nil {
		var l coordinationv1.Lease
		err := r.c.Get(ctx, r.key(), &l)
		switch {
		case apierrors.IsNotFound(err):
			l = coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: r.o.Namespace, Name: r.o.Name, OwnerReferences: []metav1.OwnerReference{owner}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &r.o.Name, LeaseDurationSeconds: &seconds,
					AcquireTime: &mt, RenewTime: &mt},
			}
			if err := r.c.Create(ctx, &l); err != nil {
				return fmt.Errorf("create Lease %s: %w", r.key(), err)
			}
			r.lease = &l
			return nil
		case err != nil:
			return fmt.Errorf("get Lease %s: %w", r.key(), err)
		}
		r.lease = &l
	}
	l := r.lease.DeepCopy()
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != r.o.Name {
		// An earlier process of this name, or a stranger: the host takes
		// its Lease over, as the next pod of a name takes its TinyHost.
		l.Spec.HolderIdentity, l.Spec.AcquireTime = &r.o.Name, &mt
	}
	l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &seconds, &mt
	l.OwnerReferences = []metav1.OwnerReference{owner}
	if err := r.c.Update(ctx, l); err != nil {
		r.lease = nil // read it again next time
		return fmt.Errorf("renew Lease %s: %w", r.key(), err)
	}
	r.lease = l
	return nil
}
