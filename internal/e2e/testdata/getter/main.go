// Command getter is a test module, "getter": its component "get" makes a
// GET of the URL of its payload with net/http through sdk/fetch and
// answers the response body, so that benchmarks can weigh an sdk guest's
// HTTP request against native Go's.
package main

import (
	"fmt"
	"io"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/fetch"
)

func get(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	resp, err := fetch.Client(ctx).Get(string(payload))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("getter: %s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func init() {
	sdk.Register(sdk.Module{Name: "getter", Version: "1.0.0"}, sdk.Component{
		Name:  "get",
		Ports: []sdk.Port{{Name: "in", Handle: get}},
	})
}

func main() {}
