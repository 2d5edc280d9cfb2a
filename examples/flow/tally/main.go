// Command tally is the module "tally" of the flow example: its component
// "counter" counts the items it receives on "in" and sums those that are
// numbers (or objects with a numeric "value"), and answers the running total
// on "total" as {"count":3,"sum":6}. The total lives in the instance's
// memory: run the module with one instance (max-instances 1) so that every
// item reaches the same one.
package main

import (
	"encoding/json"
	"fmt"

	"github.com/tinyhost/tinyhost/sdk"
)

// Total is what counter answers on "total".
type Total struct {
	Count int     `json:"count"`
	Sum   float64 `json:"sum"`
}

var total Total

func add(_ *sdk.Context, _ string, payload []byte) ([]byte, error) {
	var item any
	if err := json.Unmarshal(payload, &item); err != nil {
		return nil, fmt.Errorf("%w: counter: an item is not JSON: %v", sdk.ErrBadRequest, err)
	}
	total.Count++
	switch v := item.(type) {
	case float64:
		total.Sum += v
	case map[string]any:
		if n, ok := v["value"].(float64); ok {
			total.Sum += n
		}
	}
	return nil, nil
}

func report(*sdk.Context, string, []byte) ([]byte, error) {
	return json.Marshal(total)
}

func init() {
	sdk.Register(sdk.Module{Name: "tally", Version: "0.1.0"}, sdk.Component{
		Name:        "counter",
		Description: "Counts and sums the items it receives; answers the total",
		Tags:        []string{"example"},
		Ports: []sdk.Port{
			{Name: "in", Handle: add},
			{Name: "total", Handle: report},
		},
	})
}

// main never runs in the c-shared build mode; init registers the component.
func main() {}
