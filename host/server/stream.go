package server

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

var errShuttingDown = status.Error(codes.Unavailable, "host is shutting down: requests without a response were not run")

// InvokeStream implements HostService.InvokeStream.
func (s *Server) InvokeStream(stream hostv1.HostService_InvokeStreamServer) error {
	ctx := stream.Context()
	return serveStream(s, stream, errShuttingDown, func(req *hostv1.InvokeStreamRequest) func() *hostv1.InvokeStreamResponse {
		return func() *hostv1.InvokeStreamResponse {
			resp := &hostv1.InvokeStreamResponse{Id: req.GetId()}
			out, err := s.invoke(ctx, req.GetRequest())
			if err != nil {
				resp.Error = status.Convert(err).Proto()
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
	if err := stream.SendHeader(metadata.Pairs(hostv1.WindowHeader, strconv.Itoa(s.opts.StreamWindow))); err != nil {
		return err
	}
	// The cancel of each request in flight, by id, for cancel requests.
	var (
		mu    sync.Mutex
		calls = map[uint64]context.CancelFunc{}
	)
	closed := hostv1.NewStatus(codes.Unavailable, api.ReasonClosed, nil, "host is shutting down: requests without a response were not run").Err()
	return serveStream(s, stream, closed, func(req *hostv1.DeliverStreamRequest) func() *hostv1.DeliverStreamResponse {
		id := req.GetId()
		if req.GetCancel() {
			mu.Lock()
			if cancel := calls[id]; cancel != nil {
				cancel()
			}
			mu.Unlock()
			return nil
		}
		resp := &hostv1.DeliverStreamResponse{Id: id}
		timeout := req.GetTimeoutNanos()
		if timeout < 0 {
			return func() *hostv1.DeliverStreamResponse {
				resp.Error = status.Newf(codes.InvalidArgument, "timeout_nanos is %d, must not be negative", timeout).Proto()
				return resp
			}
		}
		// One context or the other: a context made and dropped would stay
		// registered with the stream's until the stream ends.
		var (
			cctx   context.Context
			cancel context.CancelFunc
		)
		if timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, time.Duration(timeout))
		} else {
			cctx, cancel = context.WithCancel(ctx)
		}
		mu.Lock()
		if calls[id] != nil {
			mu.Unlock()
			cancel()
			return func() *hostv1.DeliverStreamResponse {
				resp.Error = status.Newf(codes.InvalidArgument, "request id %d is already in flight", id).Proto()
				return resp
			}
		}
		calls[id] = cancel
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
				resp.Error = status.Convert(err).Proto()
			} else {
				resp.Payload = reply
			}
			return resp
		}
	})
}

// serverStream is the server side of a bidirectional stream of requests
// and responses.
type serverStream[Req, Resp any] interface {
	Context() context.Context
	Recv() (*Req, error)
	Send(*Resp) error
}

// quick is the longest a request may run on the stream's reader: the
// recent requests of a stream that took less on average run there, and
// one that runs longer hands reading over to another goroutine. A
// hand-off between goroutines costs a few microseconds of CPU, as much as
// a small guest call; past quick, running requests side by side is worth
// it.
const quick = 20 * time.Microsecond

// serveStream runs the requests of a bidirectional stream concurrently and
// sends each response as it completes.
//
// A reader goroutine takes a request off the wire only when one of
// StreamWindow slots is free and the stream holds less than
// MaxMessageBytes of requests not yet answered and replies not yet sent,
// so a client that sends faster than the host answers, or never reads its
// replies, is held back by gRPC flow control rather than by memory: a
// stream holds about two messages' bytes, not StreamWindow of them (the
// replies of requests taken while it held less may add theirs). It
// passes each request to accept, in the order received; accept returns
// the work that answers it, or nil when the request gets no response.
//
// While the stream's recent requests were quick, the reader runs the work
// itself and sends the response, as a bare server's loop would: no
// hand-off between goroutines. One that runs longer than quick has a new
// goroutine take over reading (when the runtime next looks at its timers:
// within about a millisecond on an idle process), and the old one ends
// with its request. While they are slow, the reader hands each to a
// worker, so that up to StreamWindow requests run at once. The reader is
// not the handler's goroutine because Recv blocks and cannot be selected
// on: the handler stays free to end the stream when the server stops,
// after answering every request already accepted, with stopped.
func serveStream[Req, Resp any](s *Server, stream serverStream[Req, Resp], stopped error, accept func(*Req) func() *Resp) error {
	r := &streamRun[Req, Resp]{
		s: s, stream: stream, accept: accept,
		slots:   make(chan struct{}, s.opts.StreamWindow),
		readErr: make(chan error, 1),
		queue:   make(chan job[Resp]),
		held:    gauge{bound: s.opts.MaxMessageBytes},
		done:    make(chan struct{}),
	}
	defer close(r.done)
	r.handOver = time.AfterFunc(time.Hour, r.handOverReader)
	r.handOver.Stop()
	defer r.handOver.Stop()
	go r.read()
	end := r.wait(stopped)
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
	if end != nil {
		return end
	}
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	return r.sendErr
}

// streamRun is one stream that serveStream serves.
type streamRun[Req, Resp any] struct {
	s      *Server
	stream serverStream[Req, Resp]
	accept func(*Req) func() *Resp

	sendMu  sync.Mutex
	sendErr error

	mu     sync.Mutex // guards closed and wg.Add
	closed bool
	wg     sync.WaitGroup

	slots   chan struct{}
	readErr chan error

	// held is the bytes of the requests taken and not yet answered and of
	// the replies not yet sent: the reader takes no request while it is at
	// its bound.
	held gauge

	// running is the number of the request the reader runs, 0 when it
	// runs none; handOver, a timer armed for each, starts a new reader
	// when it still runs it. The number is the reader's own: a reader
	// that was replaced sees another number and ends.
	running  atomic.Uint64
	runs     uint64 // the readers' only
	handOver *time.Timer
	// cost is the recent requests' time to run and send, a moving
	// average in nanoseconds: past quick, the reader hands them to
	// workers.
	cost atomic.Int64

	// Workers run requests handed to them and stay for the next one
	// until the stream ends: a guest call needs a deep stack, which a
	// goroutine made per request would grow, by copying, every time.
	queue   chan job[Resp]
	workers int // the readers' only
	taken   int // the requests taken with work; the readers' only
	done    chan struct{}
}

// roomWait, when set (by a test), is told how many requests a stream
// took when its reader begins to wait for room.
var roomWait func(taken int)

// job is a request's work and the bytes of the request, which the stream
// holds until its reply is sent.
type job[Resp any] struct {
	work func() *Resp
	n    int
}

// hold adds n bytes (fewer when negative) to what the stream holds.
func (r *streamRun[Req, Resp]) hold(n int) { r.held.add(n) }

// waitRoom waits until the stream holds less than its bound; false when
// the stream or the server ends first.
func (r *streamRun[Req, Resp]) waitRoom(ctx context.Context) bool {
	room := r.held.room()
	if room == nil {
		return true
	}
	if roomWait != nil {
		roomWait(r.taken)
	}
	select {
	case <-room:
		return true
	case <-r.s.stopping:
		return false
	case <-ctx.Done():
		return false
	}
}

// gauge is a count of bytes held, which a reader waits to fall below its
// bound.
type gauge struct {
	bound int
	mu    sync.Mutex
	n     int
	wait  chan struct{} // closed when n falls below bound; nil when no one waits
}

func (g *gauge) add(n int) {
	g.mu.Lock()
	g.n += n
	if g.wait != nil && g.n < g.bound {
		close(g.wait)
		g.wait = nil
	}
	g.mu.Unlock()
}

// room returns nil when g holds less than its bound, else a channel closed
// when it does.
func (g *gauge) room() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n < g.bound {
		return nil
	}
	if g.wait == nil {
		g.wait = make(chan struct{})
	}
	return g.wait
}

// wait returns why the stream ends: nil when the client closed it,
// stopped when the server stops, or the error of the stream.
func (r *streamRun[Req, Resp]) wait(stopped error) error {
	select {
	case err := <-r.readErr:
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case <-r.s.stopping:
		return stopped
	case <-r.stream.Context().Done():
		return status.FromContextError(r.stream.Context().Err()).Err()
	}
}

// read takes requests off the wire, one per free slot, and runs them,
// until the stream ends, the handler stops taking them, or a request it
// runs is slow enough that another goroutine took over reading.
func (r *streamRun[Req, Resp]) read() {
	ctx := r.stream.Context()
	for {
		select {
		case r.slots <- struct{}{}:
		case <-r.s.stopping:
			return
		case <-ctx.Done():
			return
		}
		if !r.waitRoom(ctx) {
			<-r.slots
			return
		}
		req, err := r.stream.Recv()
		if err != nil {
			<-r.slots
			r.readErr <- err
			return
		}
		j, ok := r.take(req)
		if !ok {
			return
		}
		if j.work == nil {
			continue
		}
		if r.cost.Load() > int64(quick) {
			r.dispatch(j)
			continue
		}
		r.runs++
		n := r.runs
		r.running.Store(n)
		r.handOver.Reset(quick)
		r.run(j)
		if !r.running.CompareAndSwap(n, 0) {
			return // another goroutine reads now, and arms handOver
		}
		r.handOver.Stop()
	}
}

// take accepts a request and returns its work, none when it gets no
// response; false when the handler has stopped taking requests: this one
// was not accepted and gets no response.
func (r *streamRun[Req, Resp]) take(req *Req) (job[Resp], bool) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return job[Resp]{}, false
	}
	work := r.accept(req)
	if work == nil {
		r.mu.Unlock()
		<-r.slots
		return job[Resp]{}, true
	}
	r.wg.Add(1)
	r.mu.Unlock()
	n := proto.Size(any(req).(proto.Message))
	r.hold(n)
	r.taken++
	return job[Resp]{work: work, n: n}, true
}

// dispatch hands work to an idle worker, or to a new one while there are
// fewer than StreamWindow.
func (r *streamRun[Req, Resp]) dispatch(work job[Resp]) {
	select {
	case r.queue <- work:
		return
	default:
	}
	if r.workers < r.s.opts.StreamWindow {
		r.workers++
		go r.worker(work)
		return
	}
	// Every worker is busy or just done: one is about to take it.
	r.queue <- work
}

// worker runs work, then the work it is handed next, until the stream
// ends.
func (r *streamRun[Req, Resp]) worker(work job[Resp]) {
	for {
		r.run(work)
		select {
		case work = <-r.queue:
		case <-r.done:
			return
		}
	}
}

// handOverReader starts a new reader when the reader still runs a request.
func (r *streamRun[Req, Resp]) handOverReader() {
	if n := r.running.Load(); n != 0 && r.running.CompareAndSwap(n, 0) {
		go r.read()
	}
}

// run runs one request's work and sends its response, unless a send
// already failed, and counts the time it took in the stream's cost.
func (r *streamRun[Req, Resp]) run(j job[Resp]) {
	m := 0 // the reply's bytes, held until it is sent
	start := time.Now()
	defer func() {
		r.hold(-j.n - m)
		c := r.cost.Load()
		r.cost.Store(c + (int64(time.Since(start))-c)/8)
		<-r.slots
		r.wg.Done()
	}()
	resp := j.work()
	m = proto.Size(any(resp).(proto.Message))
	r.hold(m)
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if r.sendErr == nil {
		r.sendErr = r.stream.Send(resp)
	}
}
