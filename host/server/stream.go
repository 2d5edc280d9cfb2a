package server

import (
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
)

var errShuttingDown = status.Error(codes.Unavailable, "host is shutting down: requests without a response were not run")

// InvokeStream implements HostService.InvokeStream.
//
// A reader goroutine takes a request off the wire only when one of
// StreamWindow slots is free, so a client that sends faster than the host
// answers is held back by gRPC flow control rather than by memory, and runs
// each request in a goroutine of its own; responses are sent as they
// complete, tagged with their request's id. The reader is not the handler's
// goroutine because Recv blocks and cannot be selected on: the handler
// stays free to end the stream when the server stops, after answering every
// request already taken.
func (s *Server) InvokeStream(stream hostv1.HostService_InvokeStreamServer) error {
	ctx := stream.Context()
	var (
		sendMu  sync.Mutex
		sendErr error

		mu     sync.Mutex // guards closed and wg.Add
		closed bool
		wg     sync.WaitGroup

		slots   = make(chan struct{}, s.opts.StreamWindow)
		readErr = make(chan error, 1)
	)
	send := func(resp *hostv1.InvokeStreamResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr == nil {
			sendErr = stream.Send(resp)
		}
	}
	run := func(req *hostv1.InvokeStreamRequest) {
		defer func() {
			<-slots
			wg.Done()
		}()
		resp := &hostv1.InvokeStreamResponse{Id: req.GetId()}
		out, err := s.invoke(ctx, req.GetRequest())
		if err != nil {
			st := status.Convert(err)
			resp.Error = &hostv1.Error{Code: uint32(st.Code()), Message: st.Message(), Reason: reasonOf(st)}
		} else {
			resp.Response = out
		}
		send(resp)
	}

	go func() {
		for {
			select {
			case slots <- struct{}{}:
			case <-s.stopping:
				return
			case <-ctx.Done():
				return
			}
			req, err := stream.Recv()
			if err != nil {
				<-slots
				readErr <- err
				return
			}
			mu.Lock()
			if closed {
				// The handler has stopped taking requests: this one was
				// not accepted and gets no response.
				mu.Unlock()
				return
			}
			wg.Add(1)
			mu.Unlock()
			go run(req)
		}
	}()

	var end error
	select {
	case err := <-readErr:
		if !errors.Is(err, io.EOF) {
			end = err
		}
	case <-s.stopping:
		end = errShuttingDown
	case <-ctx.Done():
		end = status.FromContextError(ctx.Err()).Err()
	}
	mu.Lock()
	closed = true
	mu.Unlock()
	wg.Wait()
	if end != nil {
		return end
	}
	sendMu.Lock()
	defer sendMu.Unlock()
	return sendErr
}
