// Command versioned is a test module, "versioned": its component "version"
// answers on "in" with the version it was built as (main.version, set with
// -ldflags -X by e2e.WasmVersion), so that a test of an upgrade tells which
// build answered each call.
package main

import "github.com/tinyhost/tinyhost/sdk"

// version is set at build time.
var version = "0.0.0"

func init() {
	sdk.Register(sdk.Module{Name: "versioned", Version: version}, sdk.Component{
		Name:        "version",
		Description: "Replies with the version of its build",
		Tags:        []string{"test"},
		Ports: []sdk.Port{{
			Name:   "in",
			Handle: func(*sdk.Context, string, []byte) ([]byte, error) { return []byte(version), nil },
		}},
	})
}

func main() {}
