package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// TestWireToOtherNamespace: team-b runs tally as billing; team-a's front
// (common) wires split/out to billing/counter/in and to its own books
// (tally). The wire to billing is left out of every host's wiring, and
// front is Wired=False, reason OtherNamespace, naming billing and why;
// what split emits goes to books, and billing counts nothing. The routes
// carry each module's namespace. A wire to a name no TinyModule holds yet
// (audit) is kept until team-b creates audit, and then left out too, and
// named.
func TestWireToOtherNamespace(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"}, hostSpec{name: "host-b"})
	ctx := ctxT(t, 5*time.Minute)
	tally := b.reg.Push(t, "examples/flow/tally", "tinyhost/tally:0.1.0")
	namespace(t, b.c, "team-a")
	namespace(t, b.c, "team-b")
	one := &v1alpha1.Limits{MinInstances: replicas(1), MaxInstances: replicas(1)}

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "billing"},
		Spec: v1alpha1.TinyModuleSpec{Image: tally.Ref, Limits: one}})
	billing := b.ready(t, "team-b", "billing", time.Minute)
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "books"},
		Spec: v1alpha1.TinyModuleSpec{Image: tally.Ref, Limits: one}})
	books := b.ready(t, "team-a", "books", time.Minute)
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "front"},
		Spec: v1alpha1.TinyModuleSpec{Image: b.comm.Ref, Wiring: []v1alpha1.Wire{
			{From: "split/out", To: "billing/counter/in"},
			{From: "split/out", To: "books/counter/in"},
			{From: "split/out", To: "audit/counter/in"},
		}}})
	front := b.ready(t, "team-a", "front", time.Minute)

	eventually(t, time.Minute, "front Wired=False, OtherNamespace", func() error {
		m := b.module(t, "team-a", "front")
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionWired)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonOtherNamespace {
			return fmt.Errorf("%s", brief(m))
		}
		return nil
	})
	c := meta.FindStatusCondition(b.module(t, "team-a", "front").Status.Conditions, v1alpha1.ConditionWired)
	assert.Contains(t, c.Message, `spec.wiring[0]: "billing/counter/in" is the module of TinyModule team-b/billing`)
	assert.Contains(t, c.Message, "another namespace than team-a, which a module may not message")
	assert.Contains(t, c.Message, "1 of 3 wires left out")
	assert.NotContains(t, c.Message, "books")

	eventually(t, 30*time.Second, "the routes with namespaces and front's wire to books alone on every host", func() error {
		return b.routedAndWired(ctx, []*hostv1.Route{
			{Module: "billing", Addresses: []string{readyAddr(billing)}, Namespace: "team-b"},
			{Module: "books", Addresses: []string{readyAddr(books)}, Namespace: "team-a"},
			{Module: "front", Addresses: []string{readyAddr(front)}, Namespace: "team-a"},
		}, []*hostv1.Wire{{From: "front/split/out", To: []string{"audit/counter/in", "books/counter/in"}}})
	})

	// team-b takes the name audit: front's wire to it goes, and its
	// condition names it.
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "audit"},
		Spec: v1alpha1.TinyModuleSpec{Image: tally.Ref, Limits: one}})
	b.ready(t, "team-b", "audit", time.Minute)
	eventually(t, 30*time.Second, "front's wire to audit left out on every host", func() error {
		return b.routedAndWired(ctx, nil, []*hostv1.Wire{{From: "front/split/out", To: []string{"books/counter/in"}}})
	})
	eventually(t, time.Minute, "front's Wired condition names audit", func() error {
		c := meta.FindStatusCondition(b.module(t, "team-a", "front").Status.Conditions, v1alpha1.ConditionWired)
		if c == nil || c.Reason != reasonOtherNamespace || !strings.Contains(c.Message, `spec.wiring[2]: "audit/counter/in" is the module of TinyModule team-b/audit`) {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})

	out, err := invoke(ctx, t, readyAddr(front), "front", "split", `[1, 2, 3]`)
	require.NoError(t, err)
	assert.JSONEq(t, `{"count":3}`, out)
	total := func(m *v1alpha1.TinyModule) string {
		resp, err := testbed.Dial(t, readyAddr(m)).Invoke(ctx, &hostv1.InvokeRequest{Module: m.Name, Component: "counter", Port: "total", Payload: []byte(`{}`)})
		require.NoError(t, err)
		return string(resp.GetPayload())
	}
	eventually(t, 30*time.Second, "books counted the split", func() error {
		if got := total(books); got != `{"count":3,"sum":6}` {
			return fmt.Errorf("books: %s", got)
		}
		return nil
	})
	// The split's emits were sent once each, along the wires the host
	// had: books has them all, and billing none.
	assert.JSONEq(t, `{"count":0,"sum":0}`, total(billing))
}
