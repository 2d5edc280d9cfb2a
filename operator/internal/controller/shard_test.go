package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/internal/kubetest"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// shardsUnderTest is a shards runnable started against the apiserver.
type shardsUnderTest struct {
	*shards
	stop context.CancelFunc
	done chan struct{}
}

func startShards(t *testing.T, c client.Client, o ShardOptions) *shardsUnderTest {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &shardsUnderTest{shards: newShards(o, c, c, c), stop: cancel, done: make(chan struct{})}
	go func() { _ = s.Start(ctx); close(s.done) }()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// owned counts the shards of kind s owns.
func (s *shards) owned(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sh := range s.held {
		if sh.kind == kind && !sh.releasing && sh.ctx.Err() == nil {
			n++
		}
	}
	return n
}

// TestShardsBalance: a replica alone takes every host and bucket; a
// second one gets half of each, and no host is owned by both at any
// moment sampled; a reconcile under way keeps its Lease held until it
// returns, even as its replica stops; a Lease taken by another holder
// ends the reconciles of its shard at once; a stopped replica's shards go
// to the one left.
func TestShardsBalance(t *testing.T) {
	env := kubetest.Start(t)
	ctx := ctxT(t, 2*time.Minute)
	hosts := []string{"a", "b", "c", "d"}
	for _, h := range hosts {
		require.NoError(t, env.Client.Create(ctx, &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: h},
			Spec: v1alpha1.TinyHostSpec{Address: "127.0.0.1:1"}}))
	}
	// Long Leases: here they change hands by release, except the stolen one.
	o := ShardOptions{Namespace: "default", LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 100 * time.Millisecond}
	o.Identity = "one"
	one := startShards(t, env.Client, o)
	require.Eventually(t, func() bool { return one.owned(kindHost) == 4 && one.owned(kindBucket) == ShardBuckets },
		30*time.Second, 50*time.Millisecond, "one replica alone owns everything")

	o.Identity = "two"
	two := startShards(t, env.Client, o)
	require.Eventually(t, func() bool {
		for _, h := range hosts {
			require.False(t, one.owns(HostShardLease(h)) && two.owns(HostShardLease(h)), "host %s owned by both", h)
		}
		return one.owned(kindHost) == 2 && two.owned(kindHost) == 2 &&
			one.owned(kindBucket) == ShardBuckets/2 && two.owned(kindBucket) == ShardBuckets/2
	}, 30*time.Second, 20*time.Millisecond, "two replicas share hosts and buckets")

	stolen, inflight := shardOf(t, two, hosts, 0), shardOf(t, two, hosts, 1)
	rctx, done, ok := two.hold(ctx, stolen)
	require.True(t, ok)
	steal(ctx, t, env.Client, stolen)
	require.Eventually(t, func() bool { return rctx.Err() != nil }, 10*time.Second, 20*time.Millisecond,
		"a reconcile of a shard whose Lease another took is cancelled")
	done()

	_, done, ok = two.hold(ctx, inflight)
	require.True(t, ok)
	two.stop()
	require.Never(t, func() bool { return leaseHolder(ctx, env.Client, inflight) != "two" }, time.Second, 50*time.Millisecond,
		"the Lease of a reconcile under way stays held while it runs")
	_, _, ok = two.hold(ctx, inflight)
	assert.False(t, ok, "no reconcile starts on a shard being released")
	done()
	<-two.done
	require.Eventually(t, func() bool { return one.owned(kindHost) == 4 && one.owned(kindBucket) == ShardBuckets },
		30*time.Second, 50*time.Millisecond, "the replica left takes everything back")
}

// shardOf is the Lease name of the i-th host s owns.
func shardOf(t *testing.T, s *shardsUnderTest, hosts []string, i int) string {
	t.Helper()
	for _, h := range hosts {
		if s.owns(HostShardLease(h)) {
			if i == 0 {
				return HostShardLease(h)
			}
			i--
		}
	}
	t.Fatalf("%s owns fewer than %d hosts", s.o.Identity, i+1)
	return ""
}

// steal writes another holder into the Lease, as a replica that took it.
func steal(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var l coordinationv1.Lease
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &l); err != nil {
			return false
		}
		l.Spec.HolderIdentity = ptr("thief")
		l.Spec.RenewTime = ptr(metav1.NowMicro())
		return c.Update(ctx, &l) == nil
	}, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("Lease %s stolen", name))
}

func leaseHolder(ctx context.Context, c client.Client, name string) string {
	var l coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &l); err != nil {
		return "(" + err.Error() + ")"
	}
	return holder(&l)
}
