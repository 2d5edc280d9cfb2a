package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tinyhost/tinyhost/operator/internal/shard"
)

// gate is all the controllers see of sharding (package shard): which
// requests and hosts this replica acts on, and under what context. Without
// Options.Shards it is unsharded, which owns everything; with them, a
// *shard.Set.
type gate interface {
	// Complete completes the controller b with r, which reconciles only
	// the requests of c this replica owns.
	Complete(b *builder.Builder, c shard.Controller, r reconcile.Reconciler) error
	// HoldHost starts work on a host outside a reconcile: ok is false when
	// the host is not this replica's; else ctx ends when it stops being
	// so, and done must be called when the work ends.
	HoldHost(ctx context.Context, host string) (_ context.Context, done func(), ok bool)
	// OnHostLost has f called when a host stops being this replica's,
	// after the last work on it returned.
	OnHostLost(f func(host string))
}

// unsharded is the gate of a replica that owns everything (the leader,
// when leader election is on).
type unsharded struct{}

func (unsharded) Complete(b *builder.Builder, _ shard.Controller, r reconcile.Reconciler) error {
	return b.Complete(r)
}

func (unsharded) HoldHost(ctx context.Context, _ string) (context.Context, func(), bool) {
	return ctx, func() {}, true
}

func (unsharded) OnHostLost(func(string)) {}
