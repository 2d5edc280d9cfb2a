package sdktest

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/tinyhost/tinyhost/abi"
)

// KV is an in-memory bucket with the semantics of the host's kv import
// (sdk.Context.KV): revisions that grow with every write to the bucket,
// create-if-absent and compare-and-swap that fail with sdk.ErrConflict, a
// quota of bytes that fails writes with sdk.ErrQuota, and the key and
// value bounds of the host's defaults, past which writes fail with
// sdk.ErrTooLarge. Harnesses given the same KV share it, as the replicas
// of a module share its bucket. It is safe for concurrent use.
type KV struct {
	// MaxKeySize, MaxValueSize and MaxBytes are the bounds, the host's
	// defaults unless set before the first use: 256 bytes, 64 KiB and
	// 16 MiB. MaxBytes counts the keys and values stored.
	MaxKeySize, MaxValueSize int
	MaxBytes                 int64
	// MaxListKeys is the most keys one listing returns. Default 1000.
	MaxListKeys int

	mu      sync.Mutex
	entries map[string]kvEntry
	rev     uint64
	bytes   int64
}

type kvEntry struct {
	value []byte
	rev   uint64
}

// SetKV gives the component the bucket kv. Without one, its kv requests
// fail with sdk.ErrDenied, as on a host that does not grant "kv".
func (h *Harness) SetKV(kv *KV) {
	h.mu.Lock()
	h.kv = kv
	h.mu.Unlock()
}

// Get returns the value of key and whether it has one, for a test to
// check what the component stored.
func (kv *KV) Get(key string) ([]byte, bool) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	e, ok := kv.entries[key]
	return append([]byte(nil), e.value...), ok
}

// serve answers a KVRequest encoding.
func (kv *KV) serve(req []byte) (abi.Status, []byte) {
	if kv == nil {
		return abi.StatusDenied, []byte("sdktest: no KV was given with SetKV")
	}
	r, err := abi.DecodeKVRequest(req)
	if err != nil {
		return abi.StatusBadRequest, []byte(err.Error())
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.fill()
	if len(r.Key) > kv.MaxKeySize {
		return abi.StatusTooLarge, []byte(fmt.Sprintf("kv: key of %d bytes, limit %d", len(r.Key), kv.MaxKeySize))
	}
	if len(r.Value) > kv.MaxValueSize {
		return abi.StatusTooLarge, []byte(fmt.Sprintf("kv: value of %d bytes, limit %d", len(r.Value), kv.MaxValueSize))
	}
	e, ok := kv.entries[r.Key]
	switch r.Op {
	case abi.KVGet:
		if !ok {
			return abi.StatusNotFound, []byte("kv: no such key")
		}
		return abi.StatusOK, append(binary.AppendUvarint(nil, e.rev), e.value...)
	case abi.KVCreate:
		if ok {
			return abi.StatusConflict, []byte("kv: key exists")
		}
	case abi.KVUpdate:
		if !ok || e.rev != r.Revision {
			return abi.StatusConflict, []byte(fmt.Sprintf("kv: revision %d is not the latest", r.Revision))
		}
	case abi.KVDelete:
		if ok {
			kv.bytes -= int64(len(r.Key) + len(e.value))
			delete(kv.entries, r.Key)
		}
		return abi.StatusOK, nil
	case abi.KVKeys:
		return abi.StatusOK, kv.keys(r.Key, int(min(r.Revision, uint64(kv.MaxListKeys))))
	}
	size := kv.bytes + int64(len(r.Key)+len(r.Value))
	if ok {
		size -= int64(len(r.Key) + len(e.value))
	}
	if size > kv.MaxBytes {
		return abi.StatusQuota, []byte(fmt.Sprintf("kv: the bucket is full (MaxBytes %d)", kv.MaxBytes))
	}
	kv.rev++
	kv.bytes = size
	kv.entries[r.Key] = kvEntry{value: append([]byte(nil), r.Value...), rev: kv.rev}
	return abi.StatusOK, binary.AppendUvarint(nil, kv.rev)
}

func (kv *KV) keys(prefix string, limit int) []byte {
	if limit == 0 {
		limit = kv.MaxListKeys
	}
	var l abi.KVKeyList
	for k := range kv.entries {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if len(l.Keys) == limit {
			l.More = true
			break
		}
		l.Keys = append(l.Keys, k)
	}
	return abi.AppendKVKeyList(nil, &l)
}

func (kv *KV) fill() {
	if kv.entries == nil {
		kv.entries = map[string]kvEntry{}
	}
	if kv.MaxKeySize == 0 {
		kv.MaxKeySize = 256
	}
	if kv.MaxValueSize == 0 {
		kv.MaxValueSize = 64 << 10
	}
	if kv.MaxBytes == 0 {
		kv.MaxBytes = 16 << 20
	}
	if kv.MaxListKeys == 0 {
		kv.MaxListKeys = 1000
	}
}
