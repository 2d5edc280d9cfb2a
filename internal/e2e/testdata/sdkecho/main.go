// Command sdkecho is a test module, "sdkecho": its component "echo" answers
// on "in" with the payload it was given. It is the SDK's fastest path, and
// the benchmarks measure the host with it.
package main

import "github.com/tinyhost/tinyhost/sdk"

func init() {
	sdk.Register(sdk.Module{Name: "sdkecho", Version: "1.0.0"}, sdk.Component{
		Name:        "echo",
		Description: "Replies with the payload",
		Tags:        []string{"test"},
		Ports: []sdk.Port{{
			Name:   "in",
			Handle: func(_ *sdk.Context, _ string, payload []byte) ([]byte, error) { return payload, nil },
		}},
	})
}

func main() {}
