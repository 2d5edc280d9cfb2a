// Command kvstore is a test module, "kvstore": its component "kv" does one
// request of the kv import per message, its payload the request's fields
// separated by spaces, and answers "ok <result>" or "<status>: <reason>"
// (the status's name, e.g. "conflict"), so that a test sees every status.
//
//	get <key>                    ok <revision> <value>
//	put <key> <value>            ok <revision>
//	create <key> <value>         ok <revision>
//	update <key> <rev> <value>   ok <revision>
//	delete <key>                 ok
//	keys <prefix|-> <limit>      ok <more> <key>...
//	incr <key>                   ok <count>, a counter by compare-and-swap
//	fill <key> <n> <bytes>       ok, or the first failure: n puts of bytes
package main

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"github.com/tinyhost/tinyhost/sdk"
)

func handle(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	f := strings.SplitN(string(payload), " ", 4)
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	kv := ctx.KV()
	var out string
	var err error
	switch f[0] {
	case "get":
		var v []byte
		var rev uint64
		if v, rev, err = kv.Get(arg(1)); err == nil {
			out = strconv.FormatUint(rev, 10) + " " + string(v)
		}
	case "put", "create":
		op := kv.Put
		if f[0] == "create" {
			op = kv.Create
		}
		var rev uint64
		rev, err = op(arg(1), []byte(strings.Join(f[2:], " ")))
		out = strconv.FormatUint(rev, 10)
	case "update":
		rev, _ := strconv.ParseUint(arg(2), 10, 64)
		rev, err = kv.Update(arg(1), []byte(arg(3)), rev)
		out = strconv.FormatUint(rev, 10)
	case "delete":
		err = kv.Delete(arg(1))
	case "keys":
		prefix := arg(1)
		if prefix == "-" {
			prefix = ""
		}
		limit, _ := strconv.Atoi(arg(2))
		var keys []string
		var more bool
		if keys, more, err = kv.Keys(prefix, limit); err == nil {
			out = strconv.FormatBool(more) + " " + strings.Join(keys, " ")
		}
	case "incr":
		var n int
		n, err = incr(kv, arg(1))
		out = strconv.Itoa(n)
	case "fill":
		n, _ := strconv.Atoi(arg(2))
		size, _ := strconv.Atoi(arg(3))
		v := bytes.Repeat([]byte{'x'}, size)
		for i := range n {
			if _, err = kv.Put(arg(1)+"."+strconv.Itoa(i), v); err != nil {
				break
			}
		}
	default:
		return nil, errors.New("kvstore: unknown request " + strconv.Quote(f[0]))
	}
	var se *sdk.Error
	if errors.As(err, &se) {
		return []byte(se.Status.String() + ": " + se.Message), nil
	}
	if err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix("ok "+out, " ")), nil
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
	sdk.Register(sdk.Module{Name: "kvstore", Version: "1.0.0"}, sdk.Component{
		Name:  "kv",
		Ports: []sdk.Port{{Name: "do", Handle: handle}},
	})
}

func main() {}
