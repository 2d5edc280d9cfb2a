package cluster

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	protoenc "google.golang.org/protobuf/proto"

	"github.com/tinyhost/tinyhost/host/hostv1"
)

// maxWindow bounds the window a peer announces, so that a peer cannot make
// this host keep an unbounded number of requests in flight to it.
const maxWindow = 4096

// deliver delivers the message encoded as body (encodeMessage) to the
// peer, waiting for its handler when wait, and returns the reply, or an
// error and whether another replica may take the message: the peer
// certainly did not run it, for a reason of its own. It uses the peer's
// delivery stream, opening one when there is none.
func (p *peerConn) deliver(ctx context.Context, body mem.Buffer, wait bool) (reply []byte, notRun bool, err error) {
	ds, err := p.stream(ctx)
	if err != nil {
		// Nothing was sent, but credentials the peer refused would be
		// refused by every replica: that goes back to the caller.
		switch status.Code(err) {
		case codes.Unauthenticated, codes.PermissionDenied:
			return nil, false, err
		}
		return nil, true, err
	}
	return ds.deliver(ctx, body, wait)
}

// stream returns the peer's open delivery stream, opening one when there
// is none, within ctx. An error means nothing was sent.
func (p *peerConn) stream(ctx context.Context) (*deliveryStream, error) {
	p.mu.Lock()
	ds := p.open
	if ds == nil {
		ds = &deliveryStream{ready: make(chan struct{}), done: make(chan struct{}), pending: map[uint64]*call{}}
		p.open = ds
		go p.connect(ds)
	}
	p.mu.Unlock()
	select {
	case <-ds.ready:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if ds.openErr != nil {
		return nil, ds.openErr
	}
	return ds, nil
}

// connect opens ds on the peer's connection and reads its responses until
// it ends. It runs in a goroutine of its own, so that a caller waiting for
// the connection is bound by its own deadline.
func (p *peerConn) connect(ds *deliveryStream) {
	ds.openErr = ds.open(p)
	if ds.openErr != nil {
		p.mu.Lock()
		if p.open == ds {
			p.open = nil
		}
		p.mu.Unlock()
		close(ds.ready)
		return
	}
	close(ds.ready)
	go ds.write()
	err := ds.read()
	if p.ctx.Err() != nil {
		// Not the callers' cancellation: the router closed the connection.
		err = status.Error(codes.Unavailable, "the connection to the peer was closed: it left the routes, or the router closed")
	}
	p.mu.Lock()
	if p.open == ds {
		p.open = nil
	}
	p.mu.Unlock()
	ds.end(err)
}

// deliveryStream is one DeliverStream to a peer. Callers queue their
// requests for one writer goroutine, so that none waits inside a Send held
// up by flow control (a wedged peer) past its deadline; one reader
// goroutine hands each response to the caller waiting for its id. A
// request is queued encoded (request): the writer holds nothing of the
// caller's message, whose payload may be a view of a guest's memory that
// is reused once the caller returns.
type deliveryStream struct {
	ready   chan struct{} // closed once open returned; then openErr is set
	openErr error
	st      hostv1.HostService_DeliverStreamClient
	slots   chan struct{} // one per request in flight, up to the peer's window
	queue   chan *request // for the writer; room for a window of requests and their cancels

	mu      sync.Mutex
	pending map[uint64]*call
	nextID  uint64
	ended   bool
	done    chan struct{} // closed when the stream ended
}

// call is a request waiting for its response.
type call struct {
	ch   chan result
	sent bool    // handed to Send: from then on it may have run; guarded by mu
	req  request // the request, made with the call
	// The fields of req's head, and room to encode them.
	fields hostv1.DeliverStreamRequest
	head   [maxHead]byte
}

// A request is a DeliverStreamRequest as it goes on the wire, encoded on
// its caller's goroutine: its head, the fields of its own (id, wait and
// timeout_nanos, or cancel), then its body, the message field, encoded
// once by encodeMessage for every replica the message is offered to, and
// read only from then on (none for a cancel). Fields in any order make one
// message on the wire.
type request struct {
	id     uint64
	cancel bool
	wire   [2]mem.Buffer // head, body
}

// maxHead is the longest head: three fields of a one-byte tag and at
// most a 10-byte varint.
const maxHead = 3 * (1 + 10)

// messageField is the field number of DeliverStreamRequest.message.
var messageField = (&hostv1.DeliverStreamRequest{}).ProtoReflect().Descriptor().Fields().ByName("message").Number()

// encodeMessage is m as the message field of a DeliverStreamRequest, the
// body of its requests, in one allocation: m, and its payload, are read
// before it returns, and not after.
func encodeMessage(m *hostv1.Message) (mem.Buffer, error) {
	size := protoenc.Size(m)
	b := make([]byte, 0, protowire.SizeTag(messageField)+protowire.SizeBytes(size))
	b = protowire.AppendTag(b, messageField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b, err := protoenc.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, m)
	if err != nil {
		return nil, err
	}
	return mem.SliceBuffer(b), nil
}

// wireCodec is the codec of the delivery streams: it sends a *request as
// the bytes it is, and marshals and unmarshals everything else (the
// responses) as gRPC's proto codec does. The bytes are handed to gRPC as
// they are, not copied: its transport writes them to the connection after
// SendMsg returned, which is why a request holds none of the caller's.
type wireCodec struct{}

var protoCodec = encoding.GetCodecV2(proto.Name)

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*request); ok {
		if r.wire[1] == nil {
			return r.wire[:1], nil
		}
		return r.wire[:], nil
	}
	return protoCodec.Marshal(v)
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return protoCodec.Unmarshal(data, v)
}

// Name is proto's: the content-subtype of the stream, which the peer
// decodes with its proto codec.
func (wireCodec) Name() string { return proto.Name }

type result struct {
	reply  []byte
	err    error
	notRun bool
}

// open opens the stream and reads the peer's window from its header.
func (ds *deliveryStream) open(p *peerConn) error {
	st, err := p.conn.RPC().DeliverStream(p.ctx, grpc.ForceCodecV2(wireCodec{}))
	if err != nil {
		return err
	}
	md, err := st.Header()
	if err == nil && len(md.Get(hostv1.WindowHeader)) == 0 {
		// The stream ended before its header: Recv has the reason.
		if _, err = st.Recv(); err == nil {
			err = status.Error(codes.Internal, "the peer answered DeliverStream without its window header")
		}
	}
	if err != nil {
		return err
	}
	window, err := strconv.Atoi(md.Get(hostv1.WindowHeader)[0])
	if err != nil || window < 1 {
		return status.Errorf(codes.Internal, "the peer announced the window %q", md.Get(hostv1.WindowHeader)[0])
	}
	window = min(window, maxWindow)
	ds.st = st
	ds.slots = make(chan struct{}, window)
	ds.queue = make(chan *request, 2*window)
	return nil
}

// write sends the queued requests until the stream ends or a Send fails
// (then the stream is broken, and read reports why).
func (ds *deliveryStream) write() {
	for {
		select {
		case req := <-ds.queue:
			if !req.cancel {
				ds.mu.Lock()
				c := ds.pending[req.id]
				if c != nil {
					c.sent = true
				}
				ds.mu.Unlock()
				if c == nil {
					continue // its caller gave up before it was sent
				}
			}
			if ds.st.SendMsg(req) != nil {
				return
			}
		case <-ds.done:
			return
		}
	}
}

// read hands each response to its caller until the stream ends, and
// returns why it ended.
func (ds *deliveryStream) read() error {
	for {
		resp, err := ds.st.Recv()
		if err != nil {
			return err
		}
		ds.mu.Lock()
		c := ds.pending[resp.GetId()]
		delete(ds.pending, resp.GetId())
		ds.mu.Unlock()
		// Every request is answered once, cancelled ones too: its answer
		// frees its slot.
		select {
		case <-ds.slots:
		default:
		}
		if c == nil {
			continue // its caller stopped waiting
		}
		r := result{reply: resp.GetPayload()}
		if e := resp.GetError(); e != nil {
			r.err = status.FromProto(e).Err()
			r.notRun = hostv1.Retryable(r.err)
		}
		c.ch <- r
	}
}

// end fails the requests still waiting: those never handed to Send did
// not run; when the peer ended the stream with CLOSED, it answered every
// request it ran, so none of the others ran either; otherwise (a broken
// connection) they may have.
func (ds *deliveryStream) end(err error) {
	if errors.Is(err, io.EOF) {
		err = status.Error(codes.Unavailable, "the peer ended the delivery stream")
	}
	notRun := hostv1.Retryable(err)
	ds.mu.Lock()
	ds.ended = true
	pending := ds.pending
	ds.pending = nil
	ds.mu.Unlock()
	close(ds.done)
	for _, c := range pending {
		c.ch <- result{err: err, notRun: notRun || !c.sent}
	}
}

// deliver sends the message encoded as body on the stream and waits for
// its response within ctx.
func (ds *deliveryStream) deliver(ctx context.Context, body mem.Buffer, wait bool) ([]byte, bool, error) {
	select {
	case ds.slots <- struct{}{}:
	case <-ds.done:
		return nil, true, status.Error(codes.Unavailable, "the delivery stream to the peer ended")
	case <-ctx.Done():
		return nil, true, status.FromContextError(ctx.Err()).Err()
	}
	// The time the caller still waits; a deadline just passed is 1 ns, as 0
	// would be none.
	var timeout time.Duration
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), 1)
	}
	c := &call{ch: make(chan result, 1)}
	ds.mu.Lock()
	if ds.ended {
		ds.mu.Unlock()
		<-ds.slots
		return nil, true, status.Error(codes.Unavailable, "the delivery stream to the peer ended")
	}
	ds.nextID++
	id := ds.nextID
	c.fields.Id, c.fields.Wait, c.fields.TimeoutNanos = id, wait, int64(timeout)
	c.req = request{id: id, wire: [2]mem.Buffer{mem.SliceBuffer(encodeHead(c.head[:0], &c.fields)), body}}
	ds.pending[id] = c
	ds.mu.Unlock()
	select {
	case ds.queue <- &c.req:
	case <-ds.done: // end answers it, as not sent
	case <-ctx.Done():
		// The queue is full of requests whose callers gave up while the
		// writer was held up: this one was not sent.
		if _, waiting := ds.forget(id); waiting {
			<-ds.slots
		}
		return nil, true, status.FromContextError(ctx.Err()).Err()
	}

	select {
	case r := <-c.ch:
		return r.reply, r.notRun, r.err
	case <-ctx.Done():
		if sent, waiting := ds.forget(id); waiting && sent {
			ds.cancel(id)
		} else if waiting {
			<-ds.slots // never sent: no response will free its slot
		}
		return nil, false, status.FromContextError(ctx.Err()).Err()
	}
}

// forget stops waiting for the response to id; it reports whether the
// request was handed to Send, and whether its response had not arrived.
func (ds *deliveryStream) forget(id uint64) (sent, waiting bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	c, ok := ds.pending[id]
	delete(ds.pending, id)
	return ok && c.sent, ok
}

// cancel tells the peer to stop running request id; its answer frees the
// request's slot. With the queue full it is dropped: the request's own
// timeout, carried to the peer, stops it there.
func (ds *deliveryStream) cancel(id uint64) {
	select {
	case ds.queue <- &request{id: id, cancel: true, wire: [2]mem.Buffer{mem.SliceBuffer(encodeHead(nil, &hostv1.DeliverStreamRequest{Id: id, Cancel: true}))}}:
	default:
	}
}

// encodeHead appends the fields of req, which has no message, to b.
func encodeHead(b []byte, req *hostv1.DeliverStreamRequest) []byte {
	// Marshalling scalars cannot fail.
	b, _ = protoenc.MarshalOptions{}.MarshalAppend(b, req)
	return b
}
