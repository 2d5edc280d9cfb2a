package abi

import (
	"bytes"
	"strings"
	"testing"
)

func TestKVRequestRoundTrip(t *testing.T) {
	for _, r := range []KVRequest{
		{Op: KVGet, Key: "a"},
		{Op: KVPut, Key: "user.ann/x=1_-", Value: []byte("v")},
		{Op: KVUpdate, Key: "k", Revision: 1 << 40, Value: []byte{}},
		{Op: KVKeys, Key: "", Revision: 10},
		{Op: KVKeys, Key: "user."},
	} {
		got, err := DecodeKVRequest(AppendKVRequest(nil, &r))
		if err != nil || got.Op != r.Op || got.Key != r.Key || got.Revision != r.Revision || !bytes.Equal(got.Value, r.Value) {
			t.Errorf("%+v: decoded %+v, %v", r, got, err)
		}
	}
}

func TestKVRequestRefused(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":          nil,
		"op 0":           AppendKVRequest(nil, &KVRequest{Op: 0, Key: "k"}),
		"op 7":           AppendKVRequest(nil, &KVRequest{Op: 7, Key: "k"}),
		"empty key":      AppendKVRequest(nil, &KVRequest{Op: KVGet}),
		"long key":       AppendKVRequest(nil, &KVRequest{Op: KVGet, Key: strings.Repeat("k", MaxKVKeyLen+1)}),
		"trailing dot":   AppendKVRequest(nil, &KVRequest{Op: KVGet, Key: "a."}),
		"double dot":     AppendKVRequest(nil, &KVRequest{Op: KVKeys, Key: "a..b"}),
		"space":          AppendKVRequest(nil, &KVRequest{Op: KVGet, Key: "a b"}),
		"not utf-8":      AppendKVRequest(nil, &KVRequest{Op: KVGet, Key: "\xff"}),
		"value of get":   AppendKVRequest(nil, &KVRequest{Op: KVGet, Key: "k", Value: []byte("v")}),
		"key past end":   {byte(KVGet), 5, 'k'},
		"no revision":    {byte(KVGet), 1, 'k'},
		"bad revision":   {byte(KVGet), 1, 'k', 0x80},
		"wildcard":       AppendKVRequest(nil, &KVRequest{Op: KVGet, Key: "a.*"}),
		"full wildcard":  AppendKVRequest(nil, &KVRequest{Op: KVKeys, Key: ">"}),
		"control in key": AppendKVRequest(nil, &KVRequest{Op: KVGet, Key: "a\x00"}),
		"update of 0":    AppendKVRequest(nil, &KVRequest{Op: KVUpdate, Key: "k", Value: []byte("v")}),
	} {
		if r, err := DecodeKVRequest(b); err == nil {
			t.Errorf("%s: accepted %+v", name, r)
		}
	}
}

func TestKVKeyListRoundTrip(t *testing.T) {
	for _, l := range []KVKeyList{{}, {Keys: []string{"a", "b.c"}, More: true}} {
		got, err := DecodeKVKeyList(AppendKVKeyList(nil, &l))
		if err != nil || got.More != l.More || len(got.Keys) != len(l.Keys) {
			t.Errorf("%+v: decoded %+v, %v", l, got, err)
		}
	}
	if _, err := DecodeKVKeyList([]byte{2, 0}); err == nil {
		t.Error("a more byte of 2 accepted")
	}
}

func FuzzDecodeKVRequest(f *testing.F) {
	f.Add(AppendKVRequest(nil, &KVRequest{Op: KVUpdate, Key: "a.b", Revision: 7, Value: []byte("x")}))
	f.Add(AppendKVRequest(nil, &KVRequest{Op: KVKeys, Key: "a.", Revision: 2}))
	f.Add([]byte{0x06, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeKVRequest(b)
		if err != nil {
			return
		}
		if r.Op < KVGet || r.Op > KVKeys || len(r.Key) > MaxKVKeyLen || ValidKVKey(r.Key, r.Op == KVKeys) != nil {
			t.Fatalf("accepted %+v", r)
		}
		if (r.Op == KVGet || r.Op == KVDelete || r.Op == KVKeys) && len(r.Value) > 0 || r.Op == KVUpdate && r.Revision == 0 {
			t.Fatalf("accepted a value with %+v", r)
		}
	})
}

func FuzzDecodeKVKeyList(f *testing.F) {
	f.Add(AppendKVKeyList(nil, &KVKeyList{Keys: []string{"a", "b"}, More: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeKVKeyList(b)
		if err == nil && len(l.Keys) > MaxKVListKeys {
			t.Fatalf("accepted %d keys", len(l.Keys))
		}
	})
}
