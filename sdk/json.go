package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JSONAppender is implemented by a reply type that writes its own JSON,
// appending it to b, as encoding.TextAppender does for text. sdk.JSON then
// skips encoding/json and its reflection, and appends into a buffer it
// reuses from call to call; see the jsonlite package.
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// JSON returns a Handler that decodes the payload as JSON into In, calls fn
// and encodes its result as the JSON reply. An empty payload decodes as the
// zero In; a payload that does not decode is answered with ErrBadRequest.
//
//	Handle: sdk.JSON(func(ctx *sdk.Context, in Request) (Reply, error) { ... })
//
// encoding/json does the work unless the types do it themselves, which in
// wasm is many times faster (see the jsonlite package): when *In implements
// json.Unmarshaler, its UnmarshalJSON gets the payload directly, not
// checked by encoding/json first; when Out implements JSONAppender, its
// AppendJSON writes the reply.
func JSON[In, Out any](fn func(ctx *Context, in In) (Out, error)) Handler {
	return func(ctx *Context, port string, payload []byte) ([]byte, error) {
		c := codecOf[In, Out](ctx)
		var zero In
		c.in = zero
		if len(bytes.TrimSpace(payload)) > 0 {
			var err error
			if c.dec != nil {
				err = c.dec.UnmarshalJSON(payload)
			} else {
				err = json.Unmarshal(payload, &c.in)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: port %s: payload is not the expected JSON: %v", ErrBadRequest, port, err)
			}
		}
		out, err := fn(ctx, c.in)
		if err != nil {
			return nil, err
		}
		if c.enc == nil {
			return json.Marshal(out)
		}
		c.out = out
		b, err := c.enc.AppendJSON(ctx.scratch())
		var none Out
		c.out = none // keep nothing of the reply alive
		ctx.keepScratch(b)
		return b, err
	}
}

// jsonCodec is what a handler made by JSON keeps per instance and port:
// the request it decodes into and the reply it encodes from, with their
// own JSON methods looked up once. A call then makes no type assertion (in
// wasm each costs hundreds of nanoseconds) and allocates neither value; fn
// gets a copy of the request.
type jsonCodec[In, Out any] struct {
	in  In
	out Out
	dec json.Unmarshaler // &in's, or nil
	enc JSONAppender     // &out's, or nil
}

func codecOf[In, Out any](ctx *Context) *jsonCodec[In, Out] {
	if ctx.in == nil || ctx.port == nil {
		return newCodec[In, Out]()
	}
	id, kept := ctx.port.id, &ctx.in.codecs
	for len(*kept) <= id {
		*kept = append(*kept, nil)
	}
	c, ok := (*kept)[id].(*jsonCodec[In, Out])
	if !ok {
		c = newCodec[In, Out]()
		(*kept)[id] = c
	}
	return c
}

func newCodec[In, Out any]() *jsonCodec[In, Out] {
	c := new(jsonCodec[In, Out])
	c.dec, _ = any(&c.in).(json.Unmarshaler)
	c.enc, _ = any(&c.out).(JSONAppender)
	return c
}

// scratch returns the instance's empty reply buffer, which JSON appends a
// reply to; the SDK copies the reply out before the next call.
func (c *Context) scratch() []byte {
	if c.in == nil {
		return nil
	}
	return c.in.scratch[:0]
}

// keepScratch keeps b's array as the reply buffer when appending grew it.
func (c *Context) keepScratch(b []byte) {
	if c.in != nil && cap(b) > cap(c.in.scratch) && cap(b) <= maxScratch {
		c.in.scratch = b[:0]
	}
}

// maxScratch bounds the reply buffer an instance keeps between calls.
const maxScratch = 64 << 10
