package controller

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// deadLetters waits until the module's status counts want dead letters
// with its DeadLetters condition status and reason, and returns the
// condition.
func (b *bed) deadLetters(t *testing.T, name string, want int64, cs metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	eventually(t, 3*time.Minute, fmt.Sprintf("%s to count %d dead letters", name, want), func() error {
		m := b.module(t, "default", name)
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionDeadLetters)
		switch {
		case m.Status.DeadLetters == nil || c == nil:
			return fmt.Errorf("no count or no condition yet: %s", brief(m))
		case *m.Status.DeadLetters != want || c.Status != cs || c.Reason != reason:
			return fmt.Errorf("deadLetters %d, condition %s %s %q", *m.Status.DeadLetters, c.Status, c.Reason, c.Message)
		}
		got = *c
		return nil
	})
	return got
}

// TestDeadLettersStatus: a module on a real host with an embedded store
// (--state-dir) counts no dead letters (condition DeadLetters False); a
// message sent at least once whose handler fails every time becomes,
// after --durable-max-attempts deliveries, the one dead letter of the
// status, the condition True and naming tinyctl; once the handler is
// fixed and the dead letter replayed through the host's API, the count
// is 0 again and the condition False. A module on a host without a store
// has neither.
func TestDeadLettersStatus(t *testing.T) {
	b := newBedWith(t, bedOptions{resync: 2 * time.Second},
		hostSpec{name: "host-a", args: []string{"--state-dir", t.TempDir(), "--durable-max-attempts", "2", "--durable-backoff", "10ms"}},
		hostSpec{name: "host-b", labels: map[string]string{"store": "none"}})
	durable := b.reg.Push(t, e2e.Durable, "tinyhost/durable:0.1.0")
	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "durable"},
		Spec: v1alpha1.TinyModuleSpec{Image: durable.Ref, Capabilities: []v1alpha1.Capability{"kv", "messaging"},
			HostSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "store", Operator: metav1.LabelSelectorOpDoesNotExist}}}},
	})
	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec:       v1alpha1.TinyModuleSpec{Image: b.hello.Ref, HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"store": "none"}}},
	})
	m := b.ready(t, "default", "durable", 3*time.Minute)
	require.Equal(t, []string{"host-a"}, readyOn(m))
	addr := readyAddr(m)
	none := b.deadLetters(t, "durable", 0, metav1.ConditionFalse, reasonDeadLettersNone)
	t.Logf("before: %s %s %q", none.Status, none.Reason, none.Message)

	call := func(component, port, payload string) string {
		t.Helper()
		resp, err := testbed.Dial(t, addr).Invoke(ctxT(t, time.Minute), &hostv1.InvokeRequest{Module: "durable", Component: component, Port: port, Payload: []byte(payload)})
		require.NoError(t, err)
		return string(resp.GetPayload())
	}
	require.Equal(t, "ok m1", call("src", "send", "durable/sink/in m1 fail"))
	c := b.deadLetters(t, "durable", 1, metav1.ConditionTrue, reasonDeadLettersPresent)
	t.Logf("dead-lettered: %s %s %q", c.Status, c.Reason, c.Message)
	assert.Contains(t, c.Message, "1 dead letter(s)")
	assert.Contains(t, c.Message, "tinyctl deadletters list durable")

	// What the status counts is what the host lists.
	hc := e2e.Client(t, addr)
	dls, err := hc.DeadLetters(ctxT(t, time.Minute), "durable", 0, 0)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, "m1", idOf(dls[0]))
	assert.Contains(t, dls[0].GetError(), "boom 2")

	require.Equal(t, "", call("kv", "put", "fixed yes"))
	require.NoError(t, hc.ReplayDeadLetter(ctxT(t, time.Minute), "durable", dls[0].GetSeq()))
	c = b.deadLetters(t, "durable", 0, metav1.ConditionFalse, reasonDeadLettersNone)
	t.Logf("replayed: %s %s %q", c.Status, c.Reason, c.Message)
	assert.Equal(t, "1", call("kv", "get", "handled.m1"), "the replayed message was handled")

	// hello runs on host-b, which keeps no store: no count, no condition.
	h := b.ready(t, "default", "hello", 3*time.Minute)
	assert.Equal(t, []string{"host-b"}, readyOn(h))
	assert.Nil(t, h.Status.DeadLetters)
	assert.Nil(t, meta.FindStatusCondition(h.Status.Conditions, v1alpha1.ConditionDeadLetters))
}

// idOf is a dead letter's message ID.
func idOf(d *hostv1.DeadLetter) string {
	for _, kv := range d.GetMessage().GetMetadata() {
		if kv.GetKey() == "tinyhost-message-id" {
			return kv.GetValue()
		}
	}
	return ""
}

// countServer answers CountDeadLetters with err, or with n and kept.
type countServer struct {
	hostv1.UnimplementedHostServiceServer
	n    uint64
	kept bool
	err  error
}

func (s *countServer) CountDeadLetters(context.Context, *hostv1.CountDeadLettersRequest) (*hostv1.CountDeadLettersResponse, error) {
	if s.err != nil {
		return nil, s.err
	}
	return &hostv1.CountDeadLettersResponse{Count: s.n, Kept: s.kept}, nil
}

// TestCountDeadLettersUnanswered: a Ready host that fails the count keeps
// the last known count and condition status, the reason CountStale naming
// the host, and the module asked again; a host that keeps no store, or
// knows no such call, takes both away and the module is not asked again.
func TestCountDeadLettersUnanswered(t *testing.T) {
	srv := &countServer{err: status.Error(codes.Unavailable, "nats: no responders")}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	hostv1.RegisterHostServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cl, err := hostclient.New(lis.Addr().String(), hostclient.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	hs := newHosts(Options{})
	hs.conns["host-a"] = &conn{name: "host-a", client: cl, probe: probe{Done: true, Ready: true}}
	r := &modules{opts: Options{ProbeTimeout: time.Minute}, hosts: hs}

	three := int64(3)
	now := metav1.Now()
	m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "durable", Generation: 2}, Status: v1alpha1.TinyModuleStatus{
		DeadLetters: &three,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionDeadLetters, Status: metav1.ConditionTrue, Reason: reasonDeadLettersPresent,
			Message: "3 dead letter(s)", ObservedGeneration: 1, LastTransitionTime: now}},
	}}
	placed := func() *v1alpha1.TinyModuleStatus {
		return &v1alpha1.TinyModuleStatus{Placements: []v1alpha1.Placement{{Host: "host-a", Phase: v1alpha1.PhaseReady}}}
	}

	st := placed()
	assert.True(t, r.countDeadLetters(t.Context(), m, st, now), "asked again after a resync period")
	require.NotNil(t, st.DeadLetters)
	assert.Equal(t, int64(3), *st.DeadLetters, "the last known count")
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDeadLetters)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, reasonCountStale, c.Reason)
	assert.Contains(t, c.Message, "host host-a did not answer")
	assert.Contains(t, c.Message, "nats: no responders")

	// Never counted and not answered: nothing to say yet.
	st = placed()
	assert.True(t, r.countDeadLetters(t.Context(), &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, st, now))
	assert.Nil(t, st.DeadLetters)
	assert.Empty(t, st.Conditions)

	for _, s := range []*countServer{{kept: false}, {err: status.Error(codes.Unimplemented, "unknown method")}} {
		srv.n, srv.kept, srv.err = s.n, s.kept, s.err
		st = placed()
		assert.False(t, r.countDeadLetters(t.Context(), m, st, now))
		assert.Nil(t, st.DeadLetters)
		assert.Nil(t, meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDeadLetters))
	}
}
