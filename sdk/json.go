package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JSON returns a Handler that decodes the payload as JSON into In, calls fn
// and encodes its result as the JSON reply. An empty payload decodes as the
// zero In; a payload that does not decode is answered with ErrBadRequest.
//
//	Handle: sdk.JSON(func(ctx *sdk.Context, in Request) (Reply, error) { ... })
func JSON[In, Out any](fn func(ctx *Context, in In) (Out, error)) Handler {
	return func(ctx *Context, port string, payload []byte) ([]byte, error) {
		var in In
		if len(bytes.TrimSpace(payload)) > 0 {
			if err := json.Unmarshal(payload, &in); err != nil {
				return nil, fmt.Errorf("%w: port %s: payload is not the expected JSON: %v", ErrBadRequest, port, err)
			}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}
