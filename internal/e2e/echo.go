package e2e

import (
	"context"
	"errors"
	"io"

	"github.com/tinyhost/tinyhost/host/hostv1"
)

// EchoServer is the baseline of the benchmarks: a bare grpc-go server of
// the host's service, with no host, pool or guest behind it. Invoke returns
// the payload; InvokeStream answers each request as it reads it, the least
// a round trip on an open stream costs.
type EchoServer struct {
	hostv1.UnimplementedHostServiceServer
}

func (EchoServer) Invoke(_ context.Context, req *hostv1.InvokeRequest) (*hostv1.InvokeResponse, error) {
	return &hostv1.InvokeResponse{Payload: req.GetPayload()}, nil
}

func (EchoServer) InvokeStream(stream hostv1.HostService_InvokeStreamServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&hostv1.InvokeStreamResponse{Id: req.GetId(), Response: &hostv1.InvokeResponse{Payload: req.GetRequest().GetPayload()}}); err != nil {
			return err
		}
	}
}
