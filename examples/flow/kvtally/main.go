// Command kvtally is the idempotent tally of the durable flow: its
// component "counter" counts the items it receives on "in" and sums those
// that are numbers (or objects with a numeric "value"), like tally, but
// keeps the total in the module's KV bucket (capability "kv"), so that
// every replica, on any host sharing the store, adds to the same total and
// it outlives the instances. A message delivered at least once carries its
// ID (metadata "tinyhost-message-id", the same in every attempt); one
// already counted is dropped, so each ID counts once however often it
// arrives. "total" answers {"count":3,"sum":6}.
//
// Two keys: "total" (the count, the sum, and the IDs of the last
// recentIDs items counted) and "seen/<ID>" for every ID counted. An item
// is added to "total" by compare-and-swap, with its ID in the same write,
// and then marked seen: a redelivery finds the mark, or, when the handler
// stopped between the two writes, finds the ID among the recent ones.
// A message without an ID (at-most-once delivery) is always counted.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
)

// recentIDs bounds the IDs "total" keeps: a handler that stopped between
// its two writes is redelivered long before this many other items count.
const recentIDs = 256

// Total is what counter answers on "total".
type Total struct {
	Count int     `json:"count"`
	Sum   float64 `json:"sum"`
}

// stored is the value of the key "total".
type stored struct {
	Total
	Recent []string `json:"recent,omitempty"`
}

func add(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	var item any
	if err := json.Unmarshal(payload, &item); err != nil {
		return nil, fmt.Errorf("%w: counter: an item is not JSON: %v", sdk.ErrBadRequest, err)
	}
	var n float64
	switch v := item.(type) {
	case float64:
		n = v
	case map[string]any:
		n, _ = v["value"].(float64)
	}
	kv := ctx.KV()
	id := ctx.Metadata(abi.MetaMessageID)
	if id != "" {
		if _, _, err := kv.Get(seenKey(id)); err == nil {
			return nil, nil // counted already
		} else if !errors.Is(err, sdk.ErrNotFound) {
			return nil, err
		}
	}
	if err := addToTotal(kv, id, n); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, nil
	}
	// A conflict is another delivery of the same ID that marked it first.
	if _, err := kv.Create(seenKey(id), []byte{'1'}); err != nil && !errors.Is(err, sdk.ErrConflict) {
		return nil, err
	}
	return nil, nil
}

// addToTotal adds one item of value n to "total" by compare-and-swap,
// retrying while other replicas write it, unless id is among its recent
// IDs.
func addToTotal(kv sdk.KV, id string, n float64) error {
	for {
		var t stored
		v, rev, err := kv.Get("total")
		switch {
		case errors.Is(err, sdk.ErrNotFound):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("counter: the stored total is not JSON: %w", err)
			}
		}
		if id != "" && slices.Contains(t.Recent, id) {
			return nil
		}
		t.Count++
		t.Sum += n
		if id != "" {
			t.Recent = append(t.Recent, id)
			if len(t.Recent) > recentIDs {
				t.Recent = slices.Delete(t.Recent, 0, len(t.Recent)-recentIDs)
			}
		}
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = kv.Create("total", b)
		} else {
			_, err = kv.Update("total", b, rev)
		}
		if !errors.Is(err, sdk.ErrConflict) {
			return err
		}
	}
}

// seenKey is the key marking id counted. An ID is the host's, but a
// message sent with one of its own choosing could hold bytes a key may
// not: those are hex-escaped.
func seenKey(id string) string {
	b := []byte("seen/")
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b = append(b, c)
		} else {
			b = fmt.Appendf(b, "=%02x", c)
		}
	}
	return string(b)
}

func report(ctx *sdk.Context, _ string, _ []byte) ([]byte, error) {
	var t stored
	v, _, err := ctx.KV().Get("total")
	switch {
	case errors.Is(err, sdk.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, fmt.Errorf("counter: the stored total is not JSON: %w", err)
		}
	}
	return json.Marshal(t.Total)
}

func init() {
	sdk.Register(sdk.Module{Name: "kvtally", Version: "0.1.0"}, sdk.Component{
		Name:        "counter",
		Description: "Counts and sums the items it receives, each message ID once, in the module's KV bucket; answers the total",
		Tags:        []string{"example"},
		Ports: []sdk.Port{
			{Name: "in", Handle: add},
			{Name: "total", Handle: report},
		},
	})
}

// main never runs in the c-shared build mode; init registers the component.
func main() {}
