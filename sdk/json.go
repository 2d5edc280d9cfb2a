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
		in := reuse[In](ctx)
		if len(bytes.TrimSpace(payload)) > 0 {
			var err error
			if u, ok := any(in).(json.Unmarshaler); ok {
				err = u.UnmarshalJSON(payload)
			} else {
				err = json.Unmarshal(payload, in)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: port %s: payload is not the expected JSON: %v", ErrBadRequest, port, err)
			}
		}
		out, err := fn(ctx, *in)
		if err != nil {
			return nil, err
		}
		if a, ok := any(out).(JSONAppender); ok {
			return ctx.appendReply(a)
		}
		return json.Marshal(out)
	}
}

// reuse returns a zero T to decode a request into: the one the instance
// keeps for the port, so that a call does not allocate it (fn gets a copy).
func reuse[T any](ctx *Context) *T {
	if ctx.in == nil || ctx.port == nil {
		return new(T)
	}
	id, d := ctx.port.id, &ctx.in.decoded
	for len(*d) <= id {
		*d = append(*d, nil)
	}
	p, ok := (*d)[id].(*T)
	if !ok {
		p = new(T)
		(*d)[id] = p
		return p
	}
	var zero T
	*p = zero
	return p
}

// appendReply has a append its JSON to the instance's reply scratch
// buffer, which the reply is copied out of before the next call.
func (c *Context) appendReply(a JSONAppender) ([]byte, error) {
	if c.in == nil {
		return a.AppendJSON(nil)
	}
	b, err := a.AppendJSON(c.in.scratch[:0])
	if cap(b) > cap(c.in.scratch) && cap(b) <= maxScratch {
		c.in.scratch = b[:0]
	}
	return b, err
}

// maxScratch bounds the reply buffer an instance keeps between calls.
const maxScratch = 64 << 10
