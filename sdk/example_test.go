package sdk_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

type greeting struct {
	Name string `json:"name"`
}

type reply struct {
	Greeting string `json:"greeting"`
}

func greet(ctx *sdk.Context, in greeting) (reply, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return reply{}, errors.New(`name is required, e.g. {"name":"Ada"}`)
	}
	ctx.Info("greeting", "name", name)
	return reply{Greeting: "Hello, " + name + "!"}, nil
}

// A module's main package registers its components in init; main stays
// empty.
func init() {
	sdk.Register(sdk.Module{Name: "hello", Version: "0.1.0"}, sdk.Component{
		Name:        "greeter",
		Description: "Greets whoever is named",
		Tags:        []string{"example"},
		Ports: []sdk.Port{
			{Name: "in", Schema: `{"type":"object","properties":{"name":{"type":"string"}}}`, Handle: sdk.JSON(greet)},
			{Name: "out", Direction: sdk.Output},
		},
	})
}

func Example() {
	// Natively, sdktest runs the component as a host would.
	h := sdktest.New("greeter")

	out, err := h.Handle("in", []byte(`{"name":"Ada"}`))
	fmt.Println(string(out), err)
	fmt.Println(h.Logs()[0].Line)

	_, err = h.Handle("in", []byte(`{}`))
	fmt.Println(err)
	// Output:
	// {"greeting":"Hello, Ada!"} <nil>
	// greeting name=Ada
	// name is required, e.g. {"name":"Ada"}
}
