package abitest

import (
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/abi"
)

// testKV: abi.ImportKV with the kv guest, on the store of the host under
// test, which the suite expects to be empty of the guest's keys: denied
// without CapKV; every operation's result; a compare-and-swap that loses
// and a create of a present key are conflicts; keys the ABI refuses are bad
// requests; a request outside memory is an ABI violation, after which the
// module still answers.
func (s *suite) testKV(t *testing.T) {
	do := func(t *testing.T, m Module, r abi.KVRequest) (abi.Status, []byte) {
		t.Helper()
		res := s.mustInvoke(t, m, "k", "do", abi.AppendKVRequest(nil, &r))
		if len(res.Payload) == 0 {
			t.Fatalf("kv answered nothing")
		}
		return abi.Status(res.Payload[0]), res.Payload[1:]
	}
	want := func(t *testing.T, got abi.Status, res []byte, want abi.Status) bool {
		t.Helper()
		if got != want {
			t.Errorf("status %v (%q), want %v", got, res, want)
		}
		return got == want
	}
	// revision makes a write that must succeed and returns its revision.
	revision := func(t *testing.T, m Module, r abi.KVRequest) uint64 {
		t.Helper()
		st, res := do(t, m, r)
		if !want(t, st, res, abi.StatusOK) {
			return 0
		}
		rev, _, err := abi.DecodeKVRevision(res)
		if err != nil || rev == 0 {
			t.Errorf("revision %d, %v; want one above 0", rev, err)
		}
		return rev
	}

	t.Run("denied-by-default", func(t *testing.T) {
		m := s.mustLoad(t, "kv", LoadSpec{})
		st, res := do(t, m, abi.KVRequest{Op: abi.KVGet, Key: "k"})
		want(t, st, res, abi.StatusDenied)
	})
	m := s.mustLoad(t, "kv", LoadSpec{Capabilities: []string{abi.CapKV}})
	const key = "abitest.kv.key"
	t.Run("operations", func(t *testing.T) {
		st, res := do(t, m, abi.KVRequest{Op: abi.KVGet, Key: key})
		want(t, st, res, abi.StatusNotFound)
		r1 := revision(t, m, abi.KVRequest{Op: abi.KVCreate, Key: key, Value: []byte("one")})
		st, res = do(t, m, abi.KVRequest{Op: abi.KVCreate, Key: key, Value: []byte("two")})
		want(t, st, res, abi.StatusConflict)
		st, res = do(t, m, abi.KVRequest{Op: abi.KVGet, Key: key})
		if want(t, st, res, abi.StatusOK) {
			rev, val, err := abi.DecodeKVRevision(res)
			if err != nil || rev != r1 || string(val) != "one" {
				t.Errorf("get: revision %d, value %q, %v; want %d, %q", rev, val, err, r1, "one")
			}
		}
		r2 := revision(t, m, abi.KVRequest{Op: abi.KVUpdate, Key: key, Revision: r1, Value: []byte("two")})
		if r2 <= r1 {
			t.Errorf("update: revision %d, want above %d", r2, r1)
		}
		st, res = do(t, m, abi.KVRequest{Op: abi.KVUpdate, Key: key, Revision: r1, Value: []byte("three")})
		want(t, st, res, abi.StatusConflict)
		revision(t, m, abi.KVRequest{Op: abi.KVPut, Key: key + "2", Value: []byte("x")})
		st, res = do(t, m, abi.KVRequest{Op: abi.KVKeys, Key: "abitest.kv."})
		if want(t, st, res, abi.StatusOK) {
			l, err := abi.DecodeKVKeyList(res)
			if err != nil || len(l.Keys) != 2 || l.More {
				t.Errorf("keys: %v, more %v, %v; want %s and %s2", l.Keys, l.More, err, key, key)
			}
		}
		st, res = do(t, m, abi.KVRequest{Op: abi.KVKeys, Key: "abitest.kv.", Revision: 1})
		if want(t, st, res, abi.StatusOK) {
			l, err := abi.DecodeKVKeyList(res)
			if err != nil || len(l.Keys) != 1 || !l.More {
				t.Errorf("keys at most 1: %v, more %v, %v; want one and more", l.Keys, l.More, err)
			}
		}
		for _, k := range []string{key, key + "2"} {
			st, res = do(t, m, abi.KVRequest{Op: abi.KVDelete, Key: k})
			want(t, st, res, abi.StatusOK)
		}
		st, res = do(t, m, abi.KVRequest{Op: abi.KVGet, Key: key})
		want(t, st, res, abi.StatusNotFound)
	})
	t.Run("bad-keys", func(t *testing.T) {
		for _, k := range []string{"", "a..b", ".a", "a.", "a b", "a*", "a>", "caf\u00e9", "\xff", strings.Repeat("k", abi.MaxKVKeyLen+1)} {
			st, res := do(t, m, abi.KVRequest{Op: abi.KVPut, Key: k, Value: []byte("v")})
			if st != abi.StatusBadRequest {
				t.Errorf("key %.40q: status %v (%q), want %v", k, st, res, abi.StatusBadRequest)
			}
		}
		st, res := do(t, m, abi.KVRequest{Op: 0x7f, Key: "k"})
		want(t, st, res, abi.StatusBadRequest)
	})
	t.Run("outside-memory", func(t *testing.T) {
		err := s.mustFail(t, m, "k", "do", []byte{0xff}, KindABI)
		wantMention(t, err, "kv")
		st, res := do(t, m, abi.KVRequest{Op: abi.KVGet, Key: key})
		want(t, st, res, abi.StatusNotFound)
	})
}
