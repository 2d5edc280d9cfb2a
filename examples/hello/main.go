// Command hello is the module "hello": one component, greeter, that answers
// {"name":"Ada"} with {"greeting":"Hello, Ada!"}. Build it for tinyhost with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hello.wasm .
package main

import (
	"errors"
	"strings"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/jsonlite"
)

// Request is what greeter takes on its port "in".
type Request struct {
	Name string `json:"name"`
}

// UnmarshalJSON reads a Request without reflection. It is optional:
// without it sdk.JSON would use encoding/json, which compiled to wasm costs
// several times the rest of the call (see sdk/jsonlite).
func (r *Request) UnmarshalJSON(data []byte) error {
	obj := jsonlite.NewObject(data)
	for obj.Next() {
		if string(obj.Key()) == "name" {
			var err error
			if r.Name, err = obj.Value().Text(); err != nil {
				return err
			}
		}
	}
	return obj.Err()
}

// Reply is greeter's answer.
type Reply struct {
	Greeting string `json:"greeting"`
}

// AppendJSON writes a Reply without reflection; optional, as UnmarshalJSON.
func (r Reply) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"greeting":`...)
	return append(jsonlite.AppendString(b, r.Greeting), '}'), nil
}

func init() {
	sdk.Register(sdk.Module{Name: "hello", Version: "0.1.0"}, sdk.Component{
		Name:        "greeter",
		Description: "Greets whoever is named",
		Tags:        []string{"example"},
		Ports: []sdk.Port{
			{
				Name:   "in",
				Schema: `{"type":"object","properties":{"name":{"type":"string","minLength":1}},"required":["name"]}`,
				Handle: sdk.JSON(greet),
			},
		},
	})
}

func greet(_ *sdk.Context, req Request) (Reply, error) {
	name := strings.TrimSpace(req.Name)
	if name == "" {
		return Reply{}, errors.New(`greeter: "name" is missing or empty; send {"name":"Ada"}`)
	}
	return Reply{Greeting: "Hello, " + name + "!"}, nil
}

// main never runs in the c-shared build mode; init registers the component.
func main() {}
