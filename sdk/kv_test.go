package sdk_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

// The component "store" does one KV operation per message, its port the
// operation and its payload the arguments separated by spaces; "incr"
// counts by compare-and-swap.
func init() {
	sdk.Register(module, sdk.Component{
		Name:  "store",
		Ports: []sdk.Port{{Name: "get"}, {Name: "put"}, {Name: "create"}, {Name: "update"}, {Name: "delete"}, {Name: "keys"}, {Name: "incr"}},
		Handle: func(ctx *sdk.Context, port string, p []byte) ([]byte, error) {
			kv := ctx.KV()
			a := strings.SplitN(string(p), " ", 3)
			arg := func(i int) string {
				if i < len(a) {
					return a[i]
				}
				return ""
			}
			rev := func(r uint64, err error) ([]byte, error) { return []byte(strconv.FormatUint(r, 10)), err }
			switch port {
			case "get":
				v, r, err := kv.Get(arg(0))
				return []byte(strconv.FormatUint(r, 10) + " " + string(v)), err
			case "put":
				return rev(kv.Put(arg(0), []byte(arg(1))))
			case "create":
				return rev(kv.Create(arg(0), []byte(arg(1))))
			case "update":
				r, _ := strconv.ParseUint(arg(1), 10, 64)
				return rev(kv.Update(arg(0), []byte(arg(2)), r))
			case "delete":
				return nil, kv.Delete(arg(0))
			case "keys":
				n, _ := strconv.Atoi(arg(1))
				keys, more, err := kv.Keys(arg(0), n)
				return []byte(strconv.FormatBool(more) + " " + strings.Join(keys, " ")), err
			}
			for {
				v, r, err := kv.Get("n")
				n, _ := strconv.Atoi(string(v))
				if errors.Is(err, sdk.ErrNotFound) {
					_, err = kv.Create("n", []byte("1"))
				} else if err == nil {
					_, err = kv.Update("n", []byte(strconv.Itoa(n+1)), r)
				}
				if !errors.Is(err, sdk.ErrConflict) {
					return nil, err
				}
			}
		},
	})
}

// TestKV: the SDK's KV against sdktest's in-memory bucket, which has the
// host's semantics: revisions, create-if-absent, compare-and-swap, keys by
// prefix, and the errors of each failure.
func TestKV(t *testing.T) {
	h := sdktest.New("store")
	_, err := h.Handle("get", []byte("k"))
	is(t, err, sdk.ErrDenied, "without SetKV, as without the grant")

	kv := &sdktest.KV{MaxBytes: 64}
	h.SetKV(kv)
	_, err = h.Handle("get", []byte("k"))
	is(t, err, sdk.ErrNotFound, "")
	r1, err := h.Handle("create", []byte("k one"))
	must(t, err, "")
	_, err = h.Handle("create", []byte("k two"))
	is(t, err, sdk.ErrConflict, "")
	got, err := h.Handle("get", []byte("k"))
	must(t, err, "")
	if string(got) != string(r1)+" one" {
		t.Errorf("get: %q, want %q", got, string(r1)+" one")
	}
	r2, err := h.Handle("update", []byte("k "+string(r1)+" two"))
	must(t, err, "")
	_, err = h.Handle("update", []byte("k "+string(r1)+" three"))
	is(t, err, sdk.ErrConflict, "a stale revision")
	_, err = h.Handle("update", []byte("k "+string(r2)+" three"))
	must(t, err, "")

	_, err = h.Handle("put", []byte("a.b "+strings.Repeat("x", 70)))
	is(t, err, sdk.ErrQuota, "")
	_, err = h.Handle("put", []byte(strings.Repeat("k", 257)+" v"))
	is(t, err, sdk.ErrTooLarge, "")
	for _, k := range []string{"a..b", "caf\u00e9", ".a"} {
		_, err = h.Handle("put", []byte(k+" v"))
		is(t, err, sdk.ErrBadRequest, k)
	}

	for _, k := range []string{"a.x", "a.y", "b"} {
		_, err := h.Handle("put", []byte(k+" v"))
		must(t, err, "")
	}
	got, err = h.Handle("keys", []byte("a. 0"))
	must(t, err, "")
	if f := strings.Fields(string(got)); len(f) != 3 || f[0] != "false" || !slices.Contains(f, "a.x") || !slices.Contains(f, "a.y") {
		t.Errorf("keys a.: %q, want false, a.x and a.y", got)
	}
	got, err = h.Handle("keys", []byte("a. 1"))
	must(t, err, "")
	if f := strings.Fields(string(got)); len(f) != 2 || f[0] != "true" {
		t.Errorf("keys a. at most 1: %q, want true and one key", got)
	}
	_, err = h.Handle("delete", []byte("b"))
	must(t, err, "")
	_, err = h.Handle("get", []byte("b"))
	is(t, err, sdk.ErrNotFound, "")
	if v, ok := kv.Get("k"); !ok || string(v) != "three" {
		t.Errorf("the bucket holds %q, %v under k; want three", v, ok)
	}
}

// TestKVShared: two harnesses given one KV share it, as a module's
// replicas share its bucket: their increments by compare-and-swap add up.
func TestKVShared(t *testing.T) {
	kv := &sdktest.KV{}
	a, b := sdktest.New("store"), sdktest.New("store")
	a.SetKV(kv)
	b.SetKV(kv)
	for range 100 {
		for _, h := range []*sdktest.Harness{a, b} {
			_, err := h.Handle("incr", nil)
			must(t, err, "")
		}
	}
	if v, _ := kv.Get("n"); string(v) != "200" {
		t.Errorf("count %q, want 200", v)
	}
}

// is fails t unless err matches target.
func is(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: %v, want %v", what, err, target)
	}
}

// must fails t now on err.
func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
