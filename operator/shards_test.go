package operator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// The shard Leases' timing in TestShards: short, so that a takeover is
// quick, with room for a loaded machine between renewals and deadlines.
const (
	shardLease    = 4 * time.Second
	shardDeadline = 3 * time.Second
	shardRetry    = 500 * time.Millisecond
)

// shardsAudit logs, with their bodies, the writes of the shard Leases
// and of what they govern.
const shardsAudit = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  verbs: [create, update, patch, delete]
  resources:
  - group: coordination.k8s.io
    resources: [leases]
  - group: operator.tinysystems.io
    resources: [tinymodules/status, tinyhosts/status]
  - group: ""
    resources: [services]
  - group: discovery.k8s.io
    resources: [endpointslices]
- level: None
`

// shardsBed is an apiserver with an audit log, a registry with hello,
// real hosts registered as TinyHosts and operator replicas with --shards.
type shardsBed struct {
	env      *kubetest.Env
	auditLog string
	hello    testbed.Module
	hosts    []string
	ops      map[string]*e2e.Operator
}

func newShardsBed(t *testing.T, hosts int, replicas ...string) *shardsBed {
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(shardsAudit), 0o600))
	b := &shardsBed{auditLog: filepath.Join(dir, "audit.log"), ops: map[string]*e2e.Operator{}}
	b.env = kubetest.StartWith(t, kubetest.Options{APIServerFlags: map[string]string{
		"audit-policy-file": policy, "audit-log-path": b.auditLog,
	}})
	reg := testbed.StartRegistry(t)
	b.hello = reg.Push(t, testbed.Hello, "tinyhost/hello:0.1.0")
	// An address an EndpointSlice takes, not loopback.
	ip := e2e.LocalIP(t)
	for i := range hosts {
		name := fmt.Sprintf("h%d", i)
		h := testbed.StartHost(t, name, "--listen", ip+":0", "--artifacts-plain-http", reg.Host)
		testbed.Register(t, b.env.Client, name, h.Addr, nil)
		b.hosts = append(b.hosts, name)
	}
	bin := e2e.Binary(t, "cmd/tinyhost-operator")
	for _, id := range replicas {
		// Each replica its own user too, which the audit log names.
		b.ops[id] = e2e.StartOperator(t, bin, b.env.UserKubeconfig(t, id, "system:masters"),
			"--shards", "--shard-identity="+id, "--leader-election-namespace=default",
			"--shard-lease-duration="+shardLease.String(), "--shard-renew-deadline="+shardDeadline.String(),
			"--shard-retry-period="+shardRetry.String())
	}
	return b
}

// TestShards runs three operator replicas with --shards against one
// apiserver and five real hosts: the hosts spread across the replicas;
// once one replica is killed (SIGKILL: it releases nothing), the others
// take its hosts within the lease duration and a retry period (with
// slack for a loaded machine), and the modules stay or come back Ready.
// The apiserver's audit log then shows one writer at a time: every status
// write (TinyModule and TinyHost status, Services and EndpointSlices) was
// made by the replica that held the Lease governing the object at that
// moment.
func TestShards(t *testing.T) {
	replicas := []string{"op-a", "op-b", "op-c"}
	b := newShardsBed(t, 5, replicas...)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	for i := range 6 {
		b.module(ctx, t, fmt.Sprintf("m%d", i))
	}
	b.allReady(t, "before the kill")

	var holders map[string][]string
	require.Eventually(t, func() bool {
		holders = b.hostHolders(ctx, t)
		return len(holders) == len(replicas) && holdersCover(holders, len(b.hosts))
	}, time.Minute, 200*time.Millisecond, "every replica holds hosts")
	for _, id := range replicas {
		t.Logf("%s holds %d hosts: %v", id, len(holders[id]), holders[id])
	}

	victim := replicas[0]
	// The victim writes its hosts' status before it dies: it may hold a
	// host it took over from another replica with nothing new to write.
	b.observed(ctx, t, holders[victim], 50)
	victimHosts := b.hostHolders(ctx, t)[victim]
	require.NotEmpty(t, victimHosts, "%s still holds hosts", victim)
	b.ops[victim].Kill(t)
	killed := time.Now()
	require.Eventually(t, func() bool {
		holders = b.hostHolders(ctx, t)
		return len(holders[victim]) == 0 && holdersCover(holders, len(b.hosts))
	}, time.Minute, 100*time.Millisecond, "the others take the hosts of "+victim)
	t.Logf("%v after %s was killed (lease %v, retry %v), its hosts are held: %v",
		time.Since(killed).Round(100*time.Millisecond), victim, shardLease, shardRetry, holders)
	b.module(ctx, t, "m6") // placed by whoever holds its bucket now
	b.allReady(t, "after the kill")
	b.observed(ctx, t, victimHosts, 100) // their status written by their new owners

	b.oneWriterAtATime(t, replicas)
}

// module creates a TinyModule of hello, one replica.
func (b *shardsBed) module(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	require.NoError(t, b.env.Client.Create(ctx, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}}))
}

// allReady waits until every TinyModule is Ready on a ready host.
func (b *shardsBed) allReady(t *testing.T, when string) {
	t.Helper()
	var notReady []string
	require.Eventually(t, func() bool {
		var mods v1alpha1.TinyModuleList
		if err := b.env.Client.List(t.Context(), &mods); err != nil {
			return false
		}
		notReady = nil
		for _, m := range mods.Items {
			if !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.ConditionReady) || m.Status.ReadyReplicas < 1 {
				notReady = append(notReady, m.Name)
			}
		}
		return len(notReady) == 0
	}, 2*time.Minute, 200*time.Millisecond, "every module Ready %s", when)
}

// observed changes the hosts' spec (a capacity of modules) and waits
// until their owners have written the new generation into their status.
func (b *shardsBed) observed(ctx context.Context, t *testing.T, hosts []string, capacity int32) {
	t.Helper()
	for _, name := range hosts {
		require.Eventually(t, func() bool {
			var h v1alpha1.TinyHost
			if err := b.env.Client.Get(ctx, client.ObjectKey{Name: name}, &h); err != nil {
				return false
			}
			h.Spec.Capacity = &v1alpha1.HostResources{Modules: ptr(capacity)}
			return b.env.Client.Update(ctx, &h) == nil
		}, time.Minute, 100*time.Millisecond, "TinyHost %s updated", name)
		require.Eventually(t, func() bool {
			var h v1alpha1.TinyHost
			return b.env.Client.Get(ctx, client.ObjectKey{Name: name}, &h) == nil && h.Status.ObservedGeneration == h.Generation
		}, time.Minute, 100*time.Millisecond, "TinyHost %s's new generation observed", name)
	}
}

// hostHolders are the hosts by the replica that holds their shard Lease
// now (an expired Lease counts for no one).
func (b *shardsBed) hostHolders(ctx context.Context, t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, h := range b.hosts {
		var l coordinationv1.Lease
		err := b.env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: operator.HostShardLease(h)}, &l)
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil ||
			time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
			continue
		}
		out[*l.Spec.HolderIdentity] = append(out[*l.Spec.HolderIdentity], h)
	}
	for _, hs := range out {
		slices.Sort(hs)
	}
	return out
}

func holdersCover(holders map[string][]string, hosts int) bool {
	n := 0
	for _, hs := range holders {
		n += len(hs)
	}
	return n == hosts
}

// oneWriterAtATime reads the audit log: for every successful write of a
// TinyModule's or TinyHost's status, a Service or an EndpointSlice by a
// replica, the holder of the Lease that governs the object at that moment
// (by the Leases' writes in the log) must be the writer.
func (b *shardsBed) oneWriterAtATime(t *testing.T, replicas []string) {
	t.Helper()
	evs := readAudit(t, b.auditLog)
	var mods v1alpha1.TinyModuleList
	require.NoError(t, b.env.Client.List(t.Context(), &mods))
	var names []string
	for _, m := range mods.Items {
		names = append(names, m.Name)
	}
	tl := leaseTimelines(evs)
	stats := map[string]*writeStats{}
	var agents []string
	for _, ev := range evs {
		if slices.Contains(replicas, ev.User.Username) && !strings.HasPrefix(ev.UserAgent, "tinyhost-operator/"+ev.User.Username) {
			agents = append(agents, ev.User.Username+": "+ev.UserAgent)
		}
		kind, lease := governing(ev, names)
		if kind == "" || !slices.Contains(replicas, ev.User.Username) {
			continue
		}
		s := stats[kind]
		if s == nil {
			s = &writeStats{writers: map[string]map[string]bool{}}
			stats[kind] = s
		}
		s.add(ev, tl.holder(lease, ev.StageTimestamp.Time))
	}
	for _, kind := range []string{"tinymodules/status", "tinyhosts/status", "services", "endpointslices"} {
		s := stats[kind]
		require.NotNil(t, s, "no write of %s by a replica", kind)
		t.Logf("%-18s %3d objects, %4d writes, writers per object (most) %d, objects written by two replicas %d, writes by a non-holder %d",
			kind, len(s.writers), s.writes, s.mostWriters(), s.handedOver(), len(s.nonHolder))
		assert.Empty(t, s.nonHolder, "%s written by a replica that did not hold its Lease", kind)
	}
	assert.Empty(t, agents, "a replica's user agent names it")
	assert.Positive(t, stats["tinyhosts/status"].handedOver(), "a killed replica's hosts are written by another after it")
}

func ptr[T any](v T) *T { return &v }
