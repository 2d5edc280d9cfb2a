package controller

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// TestWiredPerHost: Wired=True means every host that runs the module
// accepted a wiring with its wires. A host that refuses SetWiring (here
// a real host behind a proxy that refuses that call alone) leaves the
// module placed on it Wired=False, naming the host and its answer, while
// a module of the same namespace on a host that took the wiring is
// Wired=True.
func TestWiredPerHost(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a", labels: map[string]string{"tier": "taking"}})
	ctx := ctxT(t, 5*time.Minute)
	namespace(t, b.c, "team-a")

	hb := testbed.StartHost(t, "host-b", "--artifacts-plain-http", b.reg.Host)
	testbed.Register(t, b.c, "host-b", refusingWiring(t, hb.Addr), map[string]string{"tier": "refusing"})

	on := func(name, tier string) {
		b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": tier}},
				Wiring: []v1alpha1.Wire{{From: "greeter/out", To: "tally/counter/in"}}}})
	}
	on("taken", "taking")
	on("refused", "refusing")
	assert.Equal(t, []string{"host-a"}, readyOn(b.ready(t, "team-a", "taken", time.Minute)))
	assert.Equal(t, []string{"host-b"}, readyOn(b.ready(t, "team-a", "refused", time.Minute)))

	wired := func(name string) *metav1.Condition {
		return meta.FindStatusCondition(b.module(t, "team-a", name).Status.Conditions, v1alpha1.ConditionWired)
	}
	eventually(t, time.Minute, "taken Wired=True", func() error {
		if c := wired("taken"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	eventually(t, time.Minute, "refused Wired=False, NotDelivered", func() error {
		c := wired("refused")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonNotDelivered {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	c := wired("refused")
	assert.Contains(t, c.Message, "host host-b: the host did not take the wiring")
	assert.Contains(t, c.Message, "this host takes no wiring")

	// What the hosts have: host-a both wires, host-b none.
	got, err := b.hosts["host-a"].Client.GetWiring(ctx, &hostv1.GetWiringRequest{})
	require.NoError(t, err)
	assert.True(t, sameList(got.GetWires(), []*hostv1.Wire{
		{From: "refused/greeter/out", To: []string{"tally/counter/in"}},
		{From: "taken/greeter/out", To: []string{"tally/counter/in"}},
	}), "%v", got.GetWires())
	got, err = hb.Client.GetWiring(ctx, &hostv1.GetWiringRequest{})
	require.NoError(t, err)
	assert.Empty(t, got.GetWires())
	// Still so once the pushes have settled: the condition follows the
	// host's answers, not the table.
	assert.Equal(t, metav1.ConditionTrue, wired("taken").Status)
}

// refusingWiring serves, on 127.0.0.1, every call of the host at addr
// but SetWiring, which it refuses, and returns its address.
func refusingWiring(t *testing.T, addr string) string {
	t.Helper()
	backend, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = backend.Close() })
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(ss)
		if strings.HasSuffix(method, "/SetWiring") {
			return status.Error(codes.PermissionDenied, "this host takes no wiring")
		}
		md, _ := metadata.FromIncomingContext(ss.Context())
		cs, err := backend.NewStream(metadata.NewOutgoingContext(ss.Context(), md.Copy()),
			&grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
		if err != nil {
			return err
		}
		go func() {
			for {
				var m []byte
				if err := ss.RecvMsg(&m); err != nil {
					_ = cs.CloseSend()
					return
				}
				if cs.SendMsg(&m) != nil {
					return
				}
			}
		}()
		if h, err := cs.Header(); err == nil {
			_ = ss.SendHeader(h)
		}
		for {
			var m []byte
			err := cs.RecvMsg(&m)
			if err != nil {
				ss.SetTrailer(cs.Trailer())
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if err := ss.SendMsg(&m); err != nil {
				return err
			}
		}
	}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// rawCodec passes messages through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestWiredMessageBounded: a module on many hosts that lack its wires
// names a few of them, and no condition message is longer than the
// schema takes (which would refuse the whole status write).
func TestWiredMessageBounded(t *testing.T) {
	m := v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "common"},
		Spec: v1alpha1.TinyModuleSpec{Wiring: []v1alpha1.Wire{{From: "split/out", To: "tally/counter/in"}}}}
	st := v1alpha1.TinyModuleStatus{}
	for i := range 300 {
		st.Placements = append(st.Placements, v1alpha1.Placement{Host: fmt.Sprintf("host-%03d", i), Phase: v1alpha1.PhaseReady})
	}
	refusing := func(string, [][2]string) string {
		return "the host did not take the wiring: " + strings.Repeat("é", 300)
	}
	setWired(&m, &st, metav1.Now(), "", nil, refusing)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWired)
	require.NotNil(t, c)
	assert.Equal(t, reasonNotDelivered, c.Reason)
	assert.True(t, strings.HasPrefix(c.Message, "300 of the 300 hosts that run it do not have its wires: host host-000: "), "%.200s", c.Message)
	assert.True(t, strings.HasSuffix(c.Message, "; and 292 more"), "%s", c.Message[len(c.Message)-100:])

	var conds []metav1.Condition
	conditionsOf(&conds, 1, metav1.Now())(v1alpha1.ConditionReady, false, "LoadFailed", strings.Repeat("é", 40000))
	assert.LessOrEqual(t, len(conds[0].Message), maxConditionMessage)
	assert.True(t, utf8.ValidString(conds[0].Message))
}
