package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

// leaseName is the operator's leader election Lease.
const leaseName = "tinyhost-operator.operator.tinysystems.io"

// TestLeaderElection runs two operator processes (the built binary, with
// leader election as it is by default) against one apiserver, each as its
// own user. The apiserver's audit log shows that the follower writes
// nothing, not even the Lease, while the leader acts on a host and a
// module; once the leader is killed (SIGKILL: it cannot release the
// Lease), the follower takes over and acts.
func TestLeaderElection(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`), 0o600))
	auditLog := filepath.Join(dir, "audit.log")
	env := kubetest.StartWith(t, kubetest.Options{APIServerFlags: map[string]string{
		"audit-policy-file": policy, "audit-log-path": auditLog,
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	bin := e2e.Binary(t, "cmd/tinyhost-operator")
	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--name", "h1"}})
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "h1"}, Spec: v1alpha1.TinyHostSpec{Address: h.Addr}}))

	ops := map[string]*e2e.Operator{}
	for _, user := range []string{"operator-a", "operator-b"} {
		ops[user] = e2e.StartOperator(t, bin, env.UserKubeconfig(t, user, "system:masters"), "--leader-election-namespace=default")
	}
	var leader string
	require.Eventually(t, func() bool {
		for user := range ops {
			if writes(t, auditLog)[user]["leases/"+leaseName] > 0 {
				leader = user
			}
		}
		return leader != ""
	}, 2*time.Minute, 100*time.Millisecond, "one operator to take the lease")
	follower := "operator-a"
	if leader == follower {
		follower = "operator-b"
	}
	t.Logf("%s leads, %s follows", leader, follower)
	for user, op := range ops {
		require.Eventually(t, func() bool { return op.Ready() == nil }, 2*time.Minute, 100*time.Millisecond, user+" ready")
	}

	// Work for the leader: a host to probe, a module to place.
	hostReady(ctx, t, env.Client, "h1")
	moduleObserved(ctx, t, env.Client, "m1")
	w := writes(t, auditLog)
	t.Logf("writes while %s leads: %s %v; %s %v", leader, leader, w[leader], follower, w[follower])
	assert.Positive(t, w[leader]["tinyhosts/status"], "the leader writes the host's status")
	assert.Positive(t, w[leader]["tinymodules/status"], "the leader writes the module's status")
	assert.Empty(t, w[follower], "the follower writes nothing")

	ops[leader].Kill(t)
	killed := time.Now()
	require.Eventually(t, func() bool {
		return writes(t, auditLog)[follower]["leases/"+leaseName] > 0
	}, 2*time.Minute, 100*time.Millisecond, follower+" to take the lease")
	t.Logf("%s took the lease %v after %s was killed", follower, time.Since(killed).Round(100*time.Millisecond), leader)
	moduleObserved(ctx, t, env.Client, "m2")
	w = writes(t, auditLog)
	t.Logf("writes of %s once it leads: %v", follower, w[follower])
	assert.Positive(t, w[follower]["tinymodules/status"], "the new leader writes the module's status")
}

// writes counts the successful writes in the audit log, by user, then by
// resource ("tinymodules/status", or "leases/<name>" for Leases).
func writes(t *testing.T, auditLog string) map[string]map[string]int {
	t.Helper()
	f, err := os.Open(auditLog)
	require.NoError(t, err)
	defer f.Close()
	out := map[string]map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource, Subresource, Name string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // a line being written
		}
		switch ev.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			continue
		}
		if ev.ResponseStatus.Code >= 300 {
			continue
		}
		what := ev.ObjectRef.Resource
		switch {
		case ev.ObjectRef.Subresource != "":
			what += "/" + ev.ObjectRef.Subresource
		case what == "leases":
			what += "/" + ev.ObjectRef.Name
		}
		if out[ev.User.Username] == nil {
			out[ev.User.Username] = map[string]int{}
		}
		out[ev.User.Username][what]++
	}
	require.NoError(t, sc.Err())
	return out
}

func hostReady(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var h v1alpha1.TinyHost
		return c.Get(ctx, client.ObjectKey{Name: name}, &h) == nil &&
			meta.IsStatusConditionTrue(h.Status.Conditions, v1alpha1.ConditionHostReady)
	}, 2*time.Minute, 100*time.Millisecond, "TinyHost "+name+" Ready")
}

// moduleObserved creates a TinyModule (of an artifact no host can fetch)
// and waits until the operator has written its status.
func moduleObserved(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.TinyModuleSpec{Image: "127.0.0.1:1/nowhere/" + name + ":v1"}}
	require.NoError(t, c.Create(ctx, m))
	require.Eventually(t, func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(m), m) == nil && m.Status.ObservedGeneration == m.Generation
	}, 2*time.Minute, 100*time.Millisecond, "the status of TinyModule "+name)
}
