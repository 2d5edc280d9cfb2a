package sdk

import (
	"github.com/tinyhost/tinyhost/abi"
)

// KV is the module's key-value bucket, through the host's kv import
// (ABI.md, section 5.4); the module needs the capability "kv". The host
// picks the bucket from the module's name: every replica of the module,
// on any host sharing the host's store, sees the same keys.
//
// A key is 1 to 1024 bytes of A-Z, a-z, 0-9 and "-/_=.", neither starting
// nor ending with "." nor holding ".."; the host may allow fewer bytes. A
// revision grows with every write. Errors match ErrNotFound (no value),
// ErrConflict (Create of a key that has a value, Update whose revision is
// not the latest), ErrQuota (the bucket is full), ErrTooLarge (the key or
// value is over the module's limits), ErrDenied (kv is not granted) and
// ErrBadRequest (an invalid key).
//
// A counter shared by replicas:
//
//	kv := ctx.KV()
//	for {
//		v, rev, err := kv.Get("count")
//		if errors.Is(err, sdk.ErrNotFound) {
//			_, err = kv.Create("count", []byte("1"))
//		} else if err == nil {
//			n, _ := strconv.Atoi(string(v))
//			_, err = kv.Update("count", []byte(strconv.Itoa(n+1)), rev)
//		}
//		if !errors.Is(err, sdk.ErrConflict) {
//			return nil, err
//		}
//	}
//
// Only a module that calls KV imports the kv host function.
type KV struct{ c *Context }

// KV returns the module's bucket, valid during the handler call as the
// Context is.
func (c *Context) KV() KV { return KV{c} }

// Get returns the value of key and its revision.
func (kv KV) Get(key string) ([]byte, uint64, error) {
	res, err := kv.do(abi.KVGet, key, 0, nil)
	if err != nil {
		return nil, 0, err
	}
	rev, val, err := abi.DecodeKVRevision(res)
	if err != nil {
		return nil, 0, &Error{Status: abi.StatusError, Message: err.Error()}
	}
	return append([]byte(nil), val...), rev, nil
}

// Put stores value under key and returns its new revision.
func (kv KV) Put(key string, value []byte) (uint64, error) {
	return kv.write(abi.KVPut, key, 0, value)
}

// Create stores value under key only if the key has no value; otherwise
// it fails with ErrConflict.
func (kv KV) Create(key string, value []byte) (uint64, error) {
	return kv.write(abi.KVCreate, key, 0, value)
}

// Update stores value under key only if rev is the key's latest revision
// (compare-and-swap); otherwise it fails with ErrConflict.
func (kv KV) Update(key string, value []byte, rev uint64) (uint64, error) {
	return kv.write(abi.KVUpdate, key, rev, value)
}

// Delete removes key; a key without a value is no error.
func (kv KV) Delete(key string) error {
	_, err := kv.do(abi.KVDelete, key, 0, nil)
	return err
}

// Keys returns at most limit keys (0: the host's limit, 1000 by default)
// that have a value and start with prefix ("" for all), in no particular
// order, and whether more match.
func (kv KV) Keys(prefix string, limit int) (keys []string, more bool, err error) {
	res, err := kv.do(abi.KVKeys, prefix, uint64(max(limit, 0)), nil)
	if err != nil {
		return nil, false, err
	}
	l, err := abi.DecodeKVKeyList(res)
	if err != nil {
		return nil, false, &Error{Status: abi.StatusError, Message: err.Error()}
	}
	return l.Keys, l.More, nil
}

func (kv KV) write(op abi.KVOp, key string, rev uint64, value []byte) (uint64, error) {
	res, err := kv.do(op, key, rev, value)
	if err != nil {
		return 0, err
	}
	rev, _, err = abi.DecodeKVRevision(res)
	if err != nil {
		return 0, &Error{Status: abi.StatusError, Message: err.Error()}
	}
	return rev, nil
}

// do makes the request; the result is valid until the next host call.
func (kv KV) do(op abi.KVOp, key string, rev uint64, value []byte) ([]byte, error) {
	c := kv.c
	if c == nil || c.comp == nil {
		return nil, errOutsideCall
	}
	c.in.msg = abi.AppendKVRequest(c.in.msg[:0], &abi.KVRequest{Op: op, Key: key, Revision: rev, Value: value})
	s, res := c.in.kvcall(c.in.msg)
	if s != abi.StatusOK {
		return nil, hostError(s, "kv", key, res)
	}
	return res, nil
}
