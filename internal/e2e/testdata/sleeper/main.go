// Command sleeper is a test module, "sleeper": its component "sleeper"
// answers on "in" after sleeping the milliseconds its payload names
// ({"ms":250} replies {"slept":250}), so that tests can hold calls in
// flight, fill a pool or shut a host down under load.
package main

import (
	"time"

	"github.com/tinyhost/tinyhost/sdk"
)

type request struct {
	MS int `json:"ms"`
}

type reply struct {
	Slept int `json:"slept"`
}

func init() {
	sdk.Register(sdk.Module{Name: "sleeper", Version: "1.0.0"}, sdk.Component{
		Name:        "sleeper",
		Description: "Sleeps, then answers",
		Tags:        []string{"test"},
		Ports: []sdk.Port{{
			Name: "in",
			Handle: sdk.JSON(func(_ *sdk.Context, r request) (reply, error) {
				time.Sleep(time.Duration(r.MS) * time.Millisecond)
				return reply{Slept: r.MS}, nil
			}),
		}},
	})
}

func main() {}
