// Command durable is a test module, "durable", of messages sent at least
// once. Its component "src" sends one per message on its port "send",
// whose payload is "<address> <id|-> <body>", and answers "ok <id>" or
// "<status>: <reason>". Its component "sink" counts each delivery of a
// message on its port "in" in the kv key "tries.<id>" and keeps the
// message's trace context in "trace.<id>"; then, by the body:
//
//	fail    fails, with "boom <try>", until the key "fixed" has a value
//	flaky   fails its first two tries, with "flaky <try>"
//	other   succeeds, counting the message in "handled.<id>" and "handled"
//
// Its component "split" emits what arrives on "in" on its output "out";
// delivered at least once, it counts each delivery in "split.<id>", and a
// body "again" fails its first delivery after it emitted.
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tinyhost/tinyhost/sdk"
)

func send(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	f := strings.SplitN(string(payload), " ", 3)
	if len(f) != 3 {
		return nil, errors.New("durable: want <address> <id|-> <body>")
	}
	id := f[1]
	if id == "-" {
		id = ""
	}
	id, err := ctx.SendAtLeastOnce(f[0], id, []byte(f[2]))
	var se *sdk.Error
	if errors.As(err, &se) {
		return []byte(se.Status.String() + ": " + se.Message), nil
	}
	if err != nil {
		return nil, err
	}
	return []byte("ok " + id), nil
}

func sink(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	kv := ctx.KV()
	id := ctx.MessageID()
	try, err := incr(kv, "tries."+id)
	if err != nil {
		return nil, err
	}
	if _, err := kv.Put("trace."+id, []byte(ctx.Metadata("traceparent"))); err != nil {
		return nil, err
	}
	switch string(payload) {
	case "fail":
		if _, _, err := kv.Get("fixed"); err != nil {
			return nil, fmt.Errorf("boom %d", try)
		}
	case "flaky":
		if try <= 2 {
			return nil, fmt.Errorf("flaky %d", try)
		}
	}
	if _, err := incr(kv, "handled."+id); err != nil {
		return nil, err
	}
	_, err = incr(kv, "handled")
	return nil, err
}

func split(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	if err := ctx.Emit("out", payload); err != nil {
		return nil, err
	}
	id := ctx.MessageID()
	if id == "" {
		return nil, nil
	}
	try, err := incr(ctx.KV(), "split."+id)
	if err != nil {
		return nil, err
	}
	if string(payload) == "again" && try == 1 {
		return nil, errors.New("split fails after it emitted")
	}
	return nil, nil
}

func get(ctx *sdk.Context, _ string, key []byte) ([]byte, error) {
	v, _, err := ctx.KV().Get(string(key))
	if errors.Is(err, sdk.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

func put(ctx *sdk.Context, _ string, kv []byte) ([]byte, error) {
	k, v, _ := strings.Cut(string(kv), " ")
	_, err := ctx.KV().Put(k, []byte(v))
	return nil, err
}

// incr adds one to the decimal count under key, retrying while another
// writer wins the compare-and-swap.
func incr(kv sdk.KV, key string) (int, error) {
	for {
		v, rev, err := kv.Get(key)
		var n int
		switch {
		case errors.Is(err, sdk.ErrNotFound):
			_, err = kv.Create(key, []byte("1"))
			n = 1
		case err == nil:
			n, _ = strconv.Atoi(string(v))
			n++
			_, err = kv.Update(key, []byte(strconv.Itoa(n)), rev)
		}
		if !errors.Is(err, sdk.ErrConflict) {
			return n, err
		}
	}
}

func init() {
	sdk.Register(sdk.Module{Name: "durable", Version: "1.0.0"},
		sdk.Component{Name: "src", Ports: []sdk.Port{{Name: "send", Handle: send}}},
		sdk.Component{Name: "sink", Ports: []sdk.Port{{Name: "in", Handle: sink}}},
		sdk.Component{Name: "kv", Ports: []sdk.Port{{Name: "get", Handle: get}, {Name: "put", Handle: put}}},
		sdk.Component{Name: "split", Ports: []sdk.Port{{Name: "in", Handle: split}, {Name: "out", Direction: sdk.Output}}},
	)
}

func main() {}
