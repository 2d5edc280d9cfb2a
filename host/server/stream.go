package server

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
)

var errShuttingDown = status.Error(codes.Unavailable, "host is shutting down: requests without a response were not run")

// WindowHeader is the response header of DeliverStream that tells the
// client how many of its requests the host runs at once.
const WindowHeader = "tinyhost-window"

// InvokeStream implements HostService.InvokeStream.
func (s *Server) InvokeStream(stream hostv1.HostService_InvokeStreamServer) error {
	ctx := stream.Context()
	return serveStream(s, stream, errShuttingDown, func(req *hostv1.InvokeStreamRequest) func() *hostv1.InvokeStreamResponse {
		return func() *hostv1.InvokeStreamResponse {
			resp := &hostv1.InvokeStreamResponse{Id: req.GetId()}
			out, err := s.invoke(ctx, req.GetRequest())
			if err != nil {
				resp.Error = errorProto(err)
			} else {
				resp.Response = out
			}
			return resp
		}
	})
}

// DeliverStream implements HostService.DeliverStream: Deliver for many
// messages on one stream, each with its own timeout and cancellable by id.
func (s *Server) DeliverStream(stream hostv1.HostService_DeliverStreamServer) error {
	ctx := stream.Context()
	if err := stream.SendHeader(metadata.Pairs(WindowHeader, strconv.Itoa(s.opts.StreamWindow))); err != nil {
		return err
	}
	// The requests in flight, by id, for cancel requests.
	type call struct{ cancel context.CancelFunc }
	var (
		mu    sync.Mutex
		calls = map[uint64]*call{}
	)
	closed := withReason(codes.Unavailable, ReasonClosed, nil, "host is shutting down: requests without a response were not run")
	return serveStream(s, stream, closed, func(req *hostv1.DeliverStreamRequest) func() *hostv1.DeliverStreamResponse {
		id := req.GetId()
		if req.GetCancel() {
			mu.Lock()
			if c := calls[id]; c != nil {
				c.cancel()
			}
			mu.Unlock()
			return nil
		}
		resp := &hostv1.DeliverStreamResponse{Id: id}
		timeout := req.GetTimeoutNanos()
		if timeout < 0 {
			return func() *hostv1.DeliverStreamResponse {
				resp.Error = errorProto(status.Errorf(codes.InvalidArgument, "timeout_nanos is %d, must not be negative", timeout))
				return resp
			}
		}
		cctx, cancel := context.WithCancel(ctx)
		if timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, time.Duration(timeout))
		}
		c := &call{cancel: cancel}
		mu.Lock()
		if calls[id] != nil {
			mu.Unlock()
			cancel()
			return func() *hostv1.DeliverStreamResponse {
				resp.Error = errorProto(status.Errorf(codes.InvalidArgument, "request id %d is already in flight", id))
				return resp
			}
		}
		calls[id] = c
		mu.Unlock()
		return func() *hostv1.DeliverStreamResponse {
			defer func() {
				mu.Lock()
				delete(calls, id)
				mu.Unlock()
				cancel()
			}()
			reply, err := s.deliver(cctx, req.GetMessage(), req.GetWait())
			if err != nil {
				resp.Error = errorProto(err)
			} else {
				resp.Payload = reply
			}
			return resp
		}
	})
}

// errorProto is a status error as a stream response's error.
func errorProto(err error) *hostv1.Error {
	st := status.Convert(err)
	return &hostv1.Error{Code: uint32(st.Code()), Message: st.Message(), Reason: reasonOf(st)}
}

// StatusFromProto is the status error a stream response's error stands
// for, with its reason (without the ErrorInfo's metadata).
func StatusFromProto(e *hostv1.Error) error {
	if e.GetReason() == "" {
		return status.Error(codes.Code(e.GetCode()), e.GetMessage())
	}
	return withReason(codes.Code(e.GetCode()), e.GetReason(), nil, e.GetMessage())
}

// serverStream is the server side of a bidirectional stream of requests
// and responses.
type serverStream[Req, Resp any] interface {
	Context() context.Context
	Recv() (*Req, error)
	Send(*Resp) error
}

// serveStream runs the requests of a bidirectional stream concurrently and
// sends each response as it completes.
//
// A reader goroutine takes a request off the wire only when one of
// StreamWindow slots is free, so a client that sends faster than the host
// answers is held back by gRPC flow control rather than by memory. It
// passes each request to accept, on the reader's goroutine and in the
// order received; accept returns the work that answers it, which runs in a
// goroutine of its own, or nil when the request gets no response. The
// reader is not the handler's goroutine because Recv blocks and cannot be
// selected on: the handler stays free to end the stream when the server
// stops, after answering every request already accepted, with stopped.
func serveStream[Req, Resp any](s *Server, stream serverStream[Req, Resp], stopped error, accept func(*Req) func() *Resp) error {
	ctx := stream.Context()
	var (
		sendMu  sync.Mutex
		sendErr error

		mu     sync.Mutex // guards closed and wg.Add
		closed bool
		wg     sync.WaitGroup

		slots   = make(chan struct{}, s.opts.StreamWindow)
		readErr = make(chan error, 1)

		// Workers run the requests and stay for the next one until the
		// stream ends: a guest call needs a deep stack, which a goroutine
		// made per request would grow, by copying, every time.
		queue   = make(chan func() *Resp)
		workers int // read and written by the reader only
		done    = make(chan struct{})
	)
	defer close(done)
	run := func(work func() *Resp) {
		defer func() {
			<-slots
			wg.Done()
		}()
		resp := work()
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr == nil {
			sendErr = stream.Send(resp)
		}
	}
	worker := func(work func() *Resp) {
		for {
			run(work)
			select {
			case work = <-queue:
			case <-done:
				return
			}
		}
	}
	dispatch := func(work func() *Resp) {
		select {
		case queue <- work:
			return
		default:
		}
		if workers < s.opts.StreamWindow {
			workers++
			go worker(work)
			return
		}
		// Every worker is busy or just done: one is about to take it.
		queue <- work
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
			work := accept(req)
			if work == nil {
				mu.Unlock()
				<-slots
				continue
			}
			wg.Add(1)
			mu.Unlock()
			dispatch(work)
		}
	}()

	var end error
	select {
	case err := <-readErr:
		if !errors.Is(err, io.EOF) {
			end = err
		}
	case <-s.stopping:
		end = stopped
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
