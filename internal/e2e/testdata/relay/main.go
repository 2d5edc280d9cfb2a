// Command relay is a test module, "relay": its component "relay" calls
// other components through the host's router, so that tests can drive
// cross-module and cross-host calls from inside a guest.
//
//   - "call" takes {"to":"module/component/port","payload":...}, calls the
//     address with the payload and answers its reply.
//   - "bounce" takes {"self":"a","peer":"b"} and calls peer/relay/bounce
//     with the two swapped: loaded as a and b, the two bounce a message back
//     and forth until the host refuses it at the hop limit.
package main

import (
	"encoding/json"
	"fmt"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/jsonlite"
)

type callRequest struct {
	To      string          `json:"to"`
	Payload json.RawMessage `json:"payload"`
}

// UnmarshalJSON reads a callRequest without reflection: relay stands for
// a component in the cross-host benchmarks, and encoding/json in wasm would
// cost more than the call it makes.
func (r *callRequest) UnmarshalJSON(data []byte) error {
	obj := jsonlite.NewObject(data)
	for obj.Next() {
		switch string(obj.Key()) {
		case "to":
			var err error
			if r.To, err = obj.Value().Text(); err != nil {
				return err
			}
		case "payload":
			r.Payload = json.RawMessage(obj.Value())
		}
	}
	return obj.Err()
}

type bounceRequest struct {
	Self string `json:"self"`
	Peer string `json:"peer"`
}

func call(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	var r callRequest
	if err := r.UnmarshalJSON(payload); err != nil {
		return nil, fmt.Errorf("%w: relay: %v", sdk.ErrBadRequest, err)
	}
	return ctx.Call(r.To, r.Payload)
}

func bounce(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	var r bounceRequest
	if err := json.Unmarshal(payload, &r); err != nil {
		return nil, fmt.Errorf("%w: relay: %v", sdk.ErrBadRequest, err)
	}
	next, _ := json.Marshal(bounceRequest{Self: r.Peer, Peer: r.Self})
	return ctx.Call(r.Peer+"/relay/bounce", next)
}

func init() {
	sdk.Register(sdk.Module{Name: "relay", Version: "1.0.0"}, sdk.Component{
		Name:        "relay",
		Description: "Calls other components through the router",
		Tags:        []string{"test"},
		Ports: []sdk.Port{
			{Name: "call", Handle: call},
			{Name: "bounce", Handle: bounce},
		},
	})
}

func main() {}
