package abi

import (
	"encoding/binary"
	"strconv"
)

// ImportKV: the module's key-value state (ABI.md 5.4). The request is a
// KVRequest encoding; the result bytes, when the status is StatusOK, depend
// on its operation (see KVOp). The host picks the module's bucket: a guest
// names keys, never a bucket, and replicas of a module on different hosts
// share it. Needs CapKV.
//
// Statuses: StatusNotFound (KVGet of a key that has no value),
// StatusConflict (KVCreate of a key that has one, KVUpdate whose revision is
// not the key's latest), StatusQuota (the module's bucket is full),
// StatusTooLarge (the key or value exceeds the module's limits),
// StatusBadRequest (a malformed encoding or key), StatusDenied (CapKV is
// not granted), StatusUnavailable (the host has no store, or it cannot be
// reached), StatusTimeout (the deadline passed).
const ImportKV = "kv"

// CapKV grants the kv import: a bucket of the module's own.
const CapKV = "kv"

// KVOp is the operation of a KVRequest.
type KVOp uint8

const (
	// KVGet: the result is the key's revision (uvarint) then its value.
	KVGet KVOp = iota + 1
	// KVPut stores the value whatever the key held; the result is the new
	// revision (uvarint).
	KVPut
	// KVCreate stores the value only if the key has none (never set, or
	// deleted); the result is the new revision.
	KVCreate
	// KVUpdate stores the value only if the key's latest revision is the
	// request's Revision, at least 1 (compare-and-swap); the result is the
	// new revision.
	KVUpdate
	// KVDelete removes the key; deleting a key without a value succeeds.
	// No result bytes.
	KVDelete
	// KVKeys lists the keys that have a value and start with the request's
	// Key (any prefix, "" for every key), at most Revision of them (0: the
	// host's limit, which also caps a larger count). The result is a
	// KVKeyList encoding. The order is unspecified.
	KVKeys
	kvOpEnd
)

// Bounds of the KV encodings, fixed by the ABI; the host's per-module
// limits are usually lower.
const (
	MaxKVKeyLen    = 1024      // bytes of a key or prefix
	MaxKVValueSize = 512 << 10 // bytes of a value
	MaxKVListKeys  = 10000     // keys of one KVKeys answer
)

// KVRequest is the request of ImportKV.
//
// Encoding (lengths unsigned LEB128, as Message):
//
//	op       one byte, a KVOp
//	key      len, bytes   (≤ MaxKVKeyLen; the prefix of KVKeys)
//	revision uvarint      (KVUpdate: the expected revision; KVKeys: the
//	                       most keys wanted; otherwise 0)
//	value    every remaining byte (KVPut, KVCreate, KVUpdate)
//
// A key is 1 to MaxKVKeyLen bytes of A-Z, a-z, 0-9 and "-/_=.", neither
// starting nor ending with "." nor holding "..": the host's store
// separates tokens with ".". A KVKeys prefix has the same characters and
// may be empty or end with ".".
type KVRequest struct {
	Op       KVOp
	Key      string
	Revision uint64
	Value    []byte
}

// AppendKVRequest appends the encoding of r to dst.
func AppendKVRequest(dst []byte, r *KVRequest) []byte {
	dst = append(dst, byte(r.Op))
	dst = appendString(dst, r.Key)
	dst = binary.AppendUvarint(dst, r.Revision)
	return append(dst, r.Value...)
}

// DecodeKVRequest decodes a KVRequest and checks its key; the value aliases
// b.
func DecodeKVRequest(b []byte) (KVRequest, error) {
	var r KVRequest
	if len(b) == 0 {
		return r, malformed("empty kv request")
	}
	r.Op = KVOp(b[0])
	if r.Op == 0 || r.Op >= kvOpEnd {
		return r, malformed("kv: unknown operation " + strconv.Itoa(int(b[0])))
	}
	rd := reader{b: b, off: 1}
	k, err := rd.bytes("key", MaxKVKeyLen)
	if err != nil {
		return r, err
	}
	if err := ValidKVKey(string(k), r.Op == KVKeys); err != nil {
		return r, err
	}
	if r.Revision, err = rd.uvarint("revision"); err != nil {
		return r, err
	}
	r.Key, r.Value = string(k), b[rd.off:]
	if r.Op == KVUpdate && r.Revision == 0 {
		return r, malformed("kv: update of revision 0: revisions start at 1; create stores a key that has no value")
	}
	switch r.Op {
	case KVPut, KVCreate, KVUpdate:
	default:
		if len(r.Value) > 0 {
			return r, malformed("kv: operation " + strconv.Itoa(int(r.Op)) + " takes no value")
		}
	}
	return r, nil
}

// ValidKVKey checks a key, or a KVKeys prefix when prefix is true (which
// may be empty or end with ".").
func ValidKVKey(k string, prefix bool) error {
	if k == "" {
		if prefix {
			return nil
		}
		return malformed("kv: empty key")
	}
	if len(k) > MaxKVKeyLen {
		return malformed("kv: key of " + strconv.Itoa(len(k)) + " bytes, limit " + strconv.Itoa(MaxKVKeyLen))
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '/' || c == '_' || c == '=' || c == '.') {
			return malformed("kv: key " + strconv.Quote(k[:min(len(k), 64)]) + " has byte " + strconv.Itoa(int(c)) + " at " + strconv.Itoa(i) + "; use A-Z, a-z, 0-9 and -/_=.")
		}
		if c == '.' && (i == 0 || k[i-1] == '.' || i == len(k)-1 && !prefix) {
			return malformed("kv: key " + strconv.Quote(k[:min(len(k), 64)]) + " starts or ends with '.' or holds '..'")
		}
	}
	return nil
}

// KVKeyList is the result of KVKeys.
//
// Encoding:
//
//	more  one byte, 1 when keys beyond these match the prefix, else 0
//	count uvarint, then count × (len, key)
type KVKeyList struct {
	Keys []string
	More bool
}

// AppendKVKeyList appends the encoding of l to dst.
func AppendKVKeyList(dst []byte, l *KVKeyList) []byte {
	more := byte(0)
	if l.More {
		more = 1
	}
	dst = append(dst, more)
	dst = binary.AppendUvarint(dst, uint64(len(l.Keys)))
	for _, k := range l.Keys {
		dst = appendString(dst, k)
	}
	return dst
}

// DecodeKVKeyList decodes a KVKeyList.
func DecodeKVKeyList(b []byte) (KVKeyList, error) {
	var l KVKeyList
	if len(b) == 0 || b[0] > 1 {
		return l, malformed("kv: key list lacks its more byte")
	}
	l.More = b[0] == 1
	rd := reader{b: b, off: 1}
	n, err := rd.uvarint("key count")
	if err != nil {
		return l, err
	}
	if n > MaxKVListKeys {
		return l, malformed("kv: " + strconv.FormatUint(n, 10) + " keys, limit " + strconv.Itoa(MaxKVListKeys))
	}
	l.Keys = make([]string, 0, n)
	for range n {
		k, err := rd.bytes("key", MaxKVKeyLen)
		if err != nil {
			return l, err
		}
		l.Keys = append(l.Keys, string(k))
	}
	return l, nil
}

// DecodeKVRevision reads the revision that starts the result of KVGet,
// KVPut, KVCreate and KVUpdate, and returns the rest (KVGet's value).
func DecodeKVRevision(b []byte) (uint64, []byte, error) {
	rev, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, malformed("kv: result lacks its revision")
	}
	return rev, b[n:], nil
}
