// Package shard lets several operator replicas share the work, each
// acting only on what it owns through a Lease in its namespace
// (coordination.k8s.io):
//
//   - a host's Lease (HostLease): its holder probes the host, loads and
//     unloads on it, pushes it the tables and writes its TinyHost status;
//   - a bucket's Lease (BucketLease): TinyModules are hashed into Buckets
//     buckets; the holder of a module's bucket places it and writes its
//     status, Service and EndpointSlices;
//   - a replica's membership Lease, so that a replica that holds nothing
//     counts when the others compute their share.
//
// Every replica watches everything and builds the route table from every
// module. Every retry period each replica renews what it holds, takes free
// or expired Leases while it holds fewer than its share (ceil(total / live
// replicas)) of hosts, and of buckets, and releases what it holds above it.
// A timer at the expiry of every Lease another replica holds brings the
// pass forward, so that a dead replica's Leases go within the lease
// duration plus a retry period.
//
// One writer at a time: the reconciles of a shard run under a context that
// ends when its Lease is lost, or at the instant its last renewal plus the
// renew deadline (shorter than the lease duration) passes, whichever comes
// first: by the time another replica may take the Lease (the last renewal
// plus the duration), none of this replica's writes for it is under way. A
// replica that releases a Lease first stops starting reconciles of it and
// waits for those under way.
//
// The controllers see a Set only as a gate: Complete wraps a reconciler so
// that it runs only on what this replica owns, HoldHost does the same for
// work that is not a reconcile (a host's route push), and OnHostLost tells
// the host sync when a host's shard went.
package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// Buckets is the number of buckets TinyModules are hashed into. Every
// replica must agree on it, so it is not an option.
const Buckets = 16

// The label of the operator's shard Leases, with their kind, and the
// prefix of their names.
const (
	Label  = "operator.tinysystems.io/shard"
	prefix = "tinyhost-operator.shard."

	kindHost   = "host"
	kindBucket = "bucket"
	kindMember = "member"
)

// Options configure sharding.
type Options struct {
	// Identity names this replica in the Leases it holds.
	Identity string
	// Namespace holds the shard Leases.
	Namespace string
	// LeaseDuration is how long a Lease is held without renewal (whole
	// seconds); RenewDeadline, shorter, how long this replica acts on a
	// shard without renewing it; RetryPeriod how often it renews, balances
	// and retries.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

func (o Options) check() error {
	switch {
	case len(validation.IsDNS1123Subdomain(memberLease(o.Identity))) > 0:
		return fmt.Errorf("shard identity %q: %v", o.Identity, validation.IsDNS1123Subdomain(memberLease(o.Identity)))
	case o.Namespace == "":
		return errors.New("shards: no namespace")
	case o.LeaseDuration < time.Second || o.LeaseDuration%time.Second != 0:
		return fmt.Errorf("shard lease duration %v: a whole number of seconds, at least 1s", o.LeaseDuration)
	case o.RenewDeadline <= 0 || o.RenewDeadline >= o.LeaseDuration:
		return fmt.Errorf("shard renew deadline %v: above zero and below the lease duration %v", o.RenewDeadline, o.LeaseDuration)
	case o.RetryPeriod <= 0 || o.RetryPeriod >= o.RenewDeadline:
		return fmt.Errorf("shard retry period %v: above zero and below the renew deadline %v", o.RetryPeriod, o.RenewDeadline)
	}
	return nil
}

// HostLease is the name of the shard Lease of a host. The hosts' own
// Leases (tinyhost --register) are named after the host, and the host sync
// ignores a Lease with Label, so that a host named like a shard Lease is
// judged by its probes alone.
func HostLease(host string) string {
	n := prefix + kindHost + "." + host
	if len(n) <= validation.DNS1123SubdomainMaxLength {
		return n
	}
	sum := sha256.Sum256([]byte(host))
	return prefix + kindHost + "." + hex.EncodeToString(sum[:16])
}

// ModuleBucket is the bucket of a TinyModule.
func ModuleBucket(namespace, name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace + "/" + name))
	return int(h.Sum32() % Buckets)
}

// BucketLease is the name of a bucket's shard Lease.
func BucketLease(bucket int) string {
	return prefix + kindBucket + "." + strconv.Itoa(bucket)
}

func memberLease(identity string) string { return prefix + kindMember + "." + identity }

// shard is a Lease this replica holds.
type shard struct {
	kind, target string // target: the host, or the bucket
	lease        *coordinationv1.Lease
	renewed      time.Time // when the last renewal that succeeded started
	ctx          context.Context
	cancel       context.CancelFunc
	deadline     *time.Timer // cancels ctx at renewed + RenewDeadline
	releasing    bool
	inflight     sync.WaitGroup
}

// Set acquires, renews and releases this replica's Leases, and tells the
// controllers what it owns. A manager Runnable.
type Set struct {
	o       Options
	c       client.Client // writes go to the apiserver
	leases  client.Reader // the cache of the shard Leases
	objects client.Reader // the manager's cache
	// hostEvents, moduleEvents and serviceEvents bring back the objects of
	// a shard acquired, to the host sync, modules and services.
	hostEvents, moduleEvents, serviceEvents chan event.GenericEvent
	// hostLost is called when a host's shard is gone, after its last
	// reconcile.
	hostLost func(host string)

	mu     sync.Mutex
	held   map[string]*shard // by Lease name
	timers map[string]*time.Timer
	kick   chan struct{}
}

// New is a Set that writes Leases with c and reads them from leases, and
// the TinyHosts and TinyModules from objects. Setup makes one for a
// manager.
func New(o Options, c client.Client, leases, objects client.Reader) (*Set, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return &Set{o: o, c: c, leases: leases, objects: objects,
		hostEvents: make(chan event.GenericEvent, 1024), moduleEvents: make(chan event.GenericEvent, 1024),
		serviceEvents: make(chan event.GenericEvent, 1024),
		held:          map[string]*shard{}, timers: map[string]*time.Timer{}, kick: make(chan struct{}, 1)}, nil
}

// Start implements manager.Runnable: a balancing pass every retry period,
// or sooner when another replica's Lease expires; on return, every Lease
// held is released so that the others take it at once.
func (s *Set) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("shards")
	tick := time.NewTicker(s.o.RetryPeriod)
	defer tick.Stop()
	for {
		if err := s.pass(ctx); err != nil && ctx.Err() == nil {
			log.Info("shard pass failed; retrying", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			s.releaseAll()
			return nil
		case <-tick.C:
		case <-s.kick:
		}
	}
}

// NeedLeaderElection: every replica runs it (sharding replaces leader
// election).
func (s *Set) NeedLeaderElection() bool { return false }

// pass renews, drops what was lost, and balances.
func (s *Set) pass(ctx context.Context) error {
	s.dropLost()
	var list coordinationv1.LeaseList
	if err := s.leases.List(ctx, &list, client.InNamespace(s.o.Namespace), client.HasLabels{Label}); err != nil {
		return err
	}
	now := time.Now()
	byName := make(map[string]*coordinationv1.Lease, len(list.Items))
	members := 0
	for i := range list.Items {
		l := &list.Items[i]
		byName[l.Name] = l
		if l.Labels[Label] == kindMember && Holder(l) != "" && now.Before(Expiry(l)) && l.Name != memberLease(s.o.Identity) {
			members++
		}
	}
	s.renew(ctx)
	if err := s.ensureMember(ctx, byName); err != nil {
		return err
	}
	members++ // this replica
	var hosts v1alpha1.TinyHostList
	if err := s.objects.List(ctx, &hosts, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	want := map[string]string{}
	for _, h := range hosts.Items {
		want[HostLease(h.Name)] = h.Name
	}
	s.balance(ctx, kindHost, want, byName, members)
	s.sweep(ctx, want, byName)
	want = map[string]string{}
	for b := range Buckets {
		want[BucketLease(b)] = strconv.Itoa(b)
	}
	s.balance(ctx, kindBucket, want, byName, members)
	s.arm(byName)
	return nil
}

// ensureMember takes this replica's membership Lease when it does not
// hold it (it renews like the others).
func (s *Set) ensureMember(ctx context.Context, byName map[string]*coordinationv1.Lease) error {
	name := memberLease(s.o.Identity)
	s.mu.Lock()
	_, ok := s.held[name]
	s.mu.Unlock()
	if ok {
		return nil
	}
	if !s.acquire(ctx, kindMember, s.o.Identity, name, byName[name], true) {
		return fmt.Errorf("shards: membership Lease %s/%s not taken", s.o.Namespace, name)
	}
	return nil
}

// balance takes free or expired Leases of kind among want (Lease name →
// target) while this replica holds fewer than its share, and releases
// what it holds above it, and what is no longer wanted.
func (s *Set) balance(ctx context.Context, kind string, want map[string]string, byName map[string]*coordinationv1.Lease, members int) {
	share := (len(want) + members - 1) / members
	var mine []string
	s.mu.Lock()
	for name, sh := range s.held {
		switch {
		case sh.kind != kind || sh.releasing:
		case want[name] == "":
			s.releaseLocked(name, sh, true)
		default:
			mine = append(mine, name)
		}
	}
	s.mu.Unlock()
	slices.Sort(mine)
	for len(mine) > share {
		name := mine[len(mine)-1]
		mine = mine[:len(mine)-1]
		s.mu.Lock()
		if sh := s.held[name]; sh != nil && !sh.releasing {
			s.releaseLocked(name, sh, false)
		}
		s.mu.Unlock()
	}
	if len(mine) >= share {
		return
	}
	now := time.Now()
	free := make([]string, 0, len(want))
	for name := range want {
		l := byName[name]
		if !slices.Contains(mine, name) && (l == nil || Holder(l) == "" || !now.Before(Expiry(l))) {
			free = append(free, name)
		}
	}
	// Replicas start from different places, so that they seldom race for
	// one Lease.
	slices.Sort(free)
	if len(free) > 0 {
		start := int(fnvString(s.o.Identity) % uint32(len(free)))
		free = append(free[start:], free[:start]...)
	}
	for _, name := range free {
		if len(mine) >= share {
			return
		}
		if s.acquire(ctx, kind, want[name], name, byName[name], false) {
			mine = append(mine, name)
		}
	}
}

func fnvString(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

// sweep deletes the expired or free host Leases of hosts that are gone,
// and the expired membership Leases of replicas that are gone.
func (s *Set) sweep(ctx context.Context, want map[string]string, byName map[string]*coordinationv1.Lease) {
	now := time.Now()
	for name, l := range byName {
		if Holder(l) != "" && now.Before(Expiry(l)) {
			continue
		}
		if kind := l.Labels[Label]; (kind != kindHost || want[name] != "") && (kind != kindMember || name == memberLease(s.o.Identity)) {
			continue
		}
		_ = s.c.Delete(ctx, l, client.Preconditions{ResourceVersion: &l.ResourceVersion})
	}
}

// arm sets a timer at the expiry of every Lease another replica holds,
// which brings the next pass forward.
func (s *Set) arm(byName map[string]*coordinationv1.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, t := range s.timers {
		t.Stop()
		delete(s.timers, name)
	}
	for name, l := range byName {
		if h := Holder(l); h == "" || h == s.o.Identity {
			continue
		}
		d := time.Until(Expiry(l))
		if d <= 0 {
			continue // the pass took it, or tried to
		}
		s.timers[name] = time.AfterFunc(d+10*time.Millisecond, func() {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		})
	}
}
