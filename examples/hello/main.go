// Command hello is the module "hello": one component, greeter, that answers
// {"name":"Ada"} with {"greeting":"Hello, Ada!"}. Build it for tinyhost with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hello.wasm .
package main

import (
	"errors"
	"strings"

	"github.com/tinyhost/tinyhost/sdk"
)

// Request is what greeter takes on its port "in".
type Request struct {
	Name string `json:"name"`
}

// Reply is greeter's answer.
type Reply struct {
	Greeting string `json:"greeting"`
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

func greet(ctx *sdk.Context, req Request) (Reply, error) {
	name := strings.TrimSpace(req.Name)
	if name == "" {
		return Reply{}, errors.New(`greeter: "name" is missing or empty; send {"name":"Ada"}`)
	}
	ctx.Debug("greeting", "name", name)
	return Reply{Greeting: "Hello, " + name + "!"}, nil
}

// main never runs in the c-shared build mode; init registers the component.
func main() {}
