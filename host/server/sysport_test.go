package server_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// TestSystemPorts: a client's Invoke and InvokeStream, and a peer's Deliver
// and DeliverStream, to a system port are PERMISSION_DENIED (reason
// DENIED) with a message naming the port; only the host delivers there.
func TestSystemPorts(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.load(t, guest(t, "echo"), "", api.Limits{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const why = "only the host delivers to system ports"

	paths := []struct {
		name string
		send func(port string) error
	}{
		{"Invoke", func(port string) error {
			_, err := e.client.Invoke(ctx, &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: port, Payload: []byte("x")})
			return err
		}},
		{"InvokeStream", func(port string) error {
			stream, err := e.client.InvokeStream(ctx)
			require.NoError(t, err)
			require.NoError(t, stream.Send(&hostv1.InvokeStreamRequest{Id: 1, Request: &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: port}}))
			require.NoError(t, stream.CloseSend())
			resp, err := stream.Recv()
			require.NoError(t, err)
			require.Equal(t, uint64(1), resp.GetId())
			return status.FromProto(resp.GetError()).Err()
		}},
		{"Deliver wait", func(port string) error {
			_, err := e.client.Deliver(ctx, &hostv1.DeliverRequest{Wait: true, Message: &hostv1.Message{Module: "echo", Component: "echo", Port: port}})
			return err
		}},
		{"Deliver", func(port string) error {
			_, err := e.client.Deliver(ctx, &hostv1.DeliverRequest{Message: &hostv1.Message{Module: "echo", Component: "echo", Port: port}})
			return err
		}},
		{"DeliverStream", func(port string) error {
			stream, _ := deliveryStream(t, ctx, e.client)
			require.NoError(t, stream.Send(&hostv1.DeliverStreamRequest{Id: 1, Wait: true, TimeoutNanos: int64(30 * time.Second),
				Message: &hostv1.Message{Module: "echo", Component: "echo", Port: port}}))
			require.NoError(t, stream.CloseSend())
			resp, err := stream.Recv()
			require.NoError(t, err)
			require.Equal(t, uint64(1), resp.GetId())
			return status.FromProto(resp.GetError()).Err()
		}},
	}
	for _, p := range paths {
		for _, port := range []string{abi.PortSettings, abi.PortTick, "_other"} {
			t.Run(p.name+" "+port, func(t *testing.T) {
				wantStatus(t, p.send(port), codes.PermissionDenied, api.ReasonDenied, strconv.Quote(port), why)
			})
		}
	}
	// The same paths still reach an ordinary port.
	resp, err := e.invoke(t, "echo", "echo", "in", []byte("still here"))
	require.NoError(t, err)
	require.Equal(t, "still here", string(resp.GetPayload()))
}
