// Command sdkecho is a test module, "sdkecho": its component "echo" answers
// on "in" with the payload it was given. It is the SDK's fastest path, and
// the benchmarks measure the host with it. On "loglevel" it answers the
// log level the host gave it (abi.EnvLogLevel).
package main

import (
	"os"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
)

func init() {
	sdk.Register(sdk.Module{Name: "sdkecho", Version: "1.0.0"}, sdk.Component{
		Name:        "echo",
		Description: "Replies with the payload",
		Tags:        []string{"test"},
		Ports: []sdk.Port{{
			Name:   "in",
			Handle: func(_ *sdk.Context, _ string, payload []byte) ([]byte, error) { return payload, nil },
		}, {
			Name:   "loglevel",
			Handle: func(*sdk.Context, string, []byte) ([]byte, error) { return []byte(os.Getenv(abi.EnvLogLevel)), nil },
		}},
	})
}

func main() {}
