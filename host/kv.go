package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// Key-value state (abi.ImportKV): the host function, its grant and its
// limits. The store itself is Options.KV, plugged in by the embedder
// (package host/state is the NATS JetStream one), so that the host links
// none.

// KV is the store of the modules' key-value state. A module's bucket is
// named by the store from the module's state key (and whatever namespace
// the store was given), never by the guest: the module's name, or
// "tenant/name" for a module loaded with the label api.LabelNamespace, so
// that a name passing from one namespace to another takes no state with
// it. Modules of the same name (and namespace) on hosts that share a
// store share a bucket.
type KV interface {
	// Bucket returns the bucket of the module of state key module, made
	// with quota if it does not exist yet, and set to it if it does.
	Bucket(ctx context.Context, module string, quota KVQuota) (KVBucket, error)
}

// stateKey is the key of the module's state in Options.KV (see KV).
func (v *version) stateKey() string {
	if ns := v.namespace(); ns != "" {
		return ns + "/" + v.name
	}
	return v.name
}

// KVQuota is what the store enforces on a bucket as a whole, whichever
// host writes to it.
type KVQuota struct {
	// MaxBytes bounds the bucket's stored bytes (api.Limits.MaxKVBytes).
	MaxBytes int64
	// MaxValueSize bounds one value (api.Limits.MaxKVValueSize).
	MaxValueSize int
}

// KVBucket is one module's bucket. Keys are valid abi.ValidKVKey keys;
// revisions start at 1 and grow with every write to the bucket. Errors
// match ErrKVNotFound, ErrKVConflict and ErrKVQuota where they say so;
// any other error is the store's failure.
type KVBucket interface {
	// Get returns the value of key and its revision, or ErrKVNotFound.
	Get(ctx context.Context, key string) ([]byte, uint64, error)
	// Put stores value under key and returns its revision. The values
	// the bucket is given are its own.
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	// Create stores value under a key that has none, or fails with
	// ErrKVConflict.
	Create(ctx context.Context, key string, value []byte) (uint64, error)
	// Update stores value if rev is the key's latest revision, or fails
	// with ErrKVConflict.
	Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error)
	// Delete removes key; a key without a value is no error.
	Delete(ctx context.Context, key string) error
	// Keys returns at most limit keys that have a value and start with
	// prefix, and whether more match.
	Keys(ctx context.Context, prefix string, limit int) (keys []string, more bool, err error)
}

// Errors of a KVBucket.
var (
	ErrKVNotFound = errors.New("kv: no such key")
	ErrKVConflict = errors.New("kv: revision conflict")
	ErrKVQuota    = errors.New("kv: bucket quota exhausted")
)

const (
	defaultMaxKVKeySize   = 256
	defaultMaxKVValueSize = 64 << 10
	defaultMaxKVBytes     = 16 << 20
	defaultMaxKVListKeys  = 1000
)

// KV is abi.ImportKV (guest.Services).
func (in *instance) KV(req []byte) (abi.Status, []byte) {
	v := in.v
	if !v.caps.has(capKV) {
		return in.kvFailed(abi.StatusDenied, "capability "+abi.CapKV+" is not granted")
	}
	r, err := abi.DecodeKVRequest(req)
	if err != nil {
		return failed(abi.StatusBadRequest, "%v", err)
	}
	l := &v.limits
	if len(r.Key) > l.MaxKVKeySize {
		return in.kvFailed(abi.StatusTooLarge, fmt.Sprintf("kv: key of %d bytes, limit %d (MaxKVKeySize)", len(r.Key), l.MaxKVKeySize))
	}
	if len(r.Value) > l.MaxKVValueSize {
		return in.kvFailed(abi.StatusTooLarge, fmt.Sprintf("kv: value of %d bytes, limit %d (MaxKVValueSize)", len(r.Value), l.MaxKVValueSize))
	}
	store := v.h.opts.KV
	if store == nil {
		return in.kvFailed(abi.StatusUnavailable, "kv: the host has no state store")
	}
	d := in.Armed.Deadline()
	if d <= watchdog.Idle {
		return failed(abi.StatusTimeout, "kv: the caller's deadline passed")
	}
	ctx, cancel := in.forwardContext(d)
	defer cancel()
	b, err := store.Bucket(ctx, v.stateKey(), KVQuota{MaxBytes: l.MaxKVBytes, MaxValueSize: l.MaxKVValueSize})
	if err != nil {
		return in.kvError(ctx, err)
	}
	// The value is guest memory, unmapped when the instance closes: the
	// store gets its own copy, which it may keep or write later.
	if len(r.Value) > 0 {
		r.Value = bytes.Clone(r.Value)
	}
	var rev uint64
	switch r.Op {
	case abi.KVGet:
		val, rev, err := b.Get(ctx, r.Key)
		if err != nil {
			return in.kvError(ctx, err)
		}
		return abi.StatusOK, append(binaryRevision(rev), val...)
	case abi.KVPut:
		rev, err = b.Put(ctx, r.Key, r.Value)
	case abi.KVCreate:
		rev, err = b.Create(ctx, r.Key, r.Value)
	case abi.KVUpdate:
		rev, err = b.Update(ctx, r.Key, r.Value, r.Revision)
	case abi.KVDelete:
		if err := b.Delete(ctx, r.Key); err != nil {
			return in.kvError(ctx, err)
		}
		return abi.StatusOK, nil
	case abi.KVKeys:
		limit := l.MaxKVListKeys
		if r.Revision > 0 && r.Revision < uint64(limit) {
			limit = int(r.Revision)
		}
		keys, more, err := b.Keys(ctx, r.Key, limit)
		if err != nil {
			return in.kvError(ctx, err)
		}
		return abi.StatusOK, abi.AppendKVKeyList(nil, &abi.KVKeyList{Keys: keys, More: more})
	}
	if err != nil {
		return in.kvError(ctx, err)
	}
	return abi.StatusOK, binaryRevision(rev)
}

func binaryRevision(rev uint64) []byte { return binary.AppendUvarint(nil, rev) }

// kvError maps the error of a store to a status.
func (in *instance) kvError(ctx context.Context, err error) (abi.Status, []byte) {
	switch {
	case errors.Is(err, ErrKVNotFound):
		return abi.StatusNotFound, []byte(err.Error())
	case errors.Is(err, ErrKVConflict):
		return abi.StatusConflict, []byte(err.Error())
	case errors.Is(err, ErrKVQuota):
		return in.kvFailed(abi.StatusQuota, fmt.Sprintf("kv: the bucket of module %q is full (MaxKVBytes %d)", in.v.name, in.v.limits.MaxKVBytes))
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return abi.StatusTimeout, []byte("kv: the deadline passed")
	}
	return in.kvFailed(abi.StatusUnavailable, "kv: "+err.Error())
}

// kvFailed logs a refused or failed request within the module's log rate.
func (in *instance) kvFailed(st abi.Status, reason string) (abi.Status, []byte) {
	in.logFailure("kv request failed", reason)
	return st, []byte(reason)
}

// overKV returns l with its zero KV limits taken from d.
func overKV(l, d api.Limits) api.Limits {
	if l.MaxKVKeySize == 0 {
		l.MaxKVKeySize = d.MaxKVKeySize
	}
	if l.MaxKVValueSize == 0 {
		l.MaxKVValueSize = d.MaxKVValueSize
	}
	if l.MaxKVBytes == 0 {
		l.MaxKVBytes = d.MaxKVBytes
	}
	if l.MaxKVListKeys == 0 {
		l.MaxKVListKeys = d.MaxKVListKeys
	}
	return l
}

func checkKVLimits(l api.Limits) []error {
	var errs []error
	for _, f := range []struct {
		name     string
		v, limit int64
	}{
		{"MaxKVKeySize", int64(l.MaxKVKeySize), abi.MaxKVKeyLen},
		{"MaxKVValueSize", int64(l.MaxKVValueSize), abi.MaxKVValueSize},
		{"MaxKVListKeys", int64(l.MaxKVListKeys), abi.MaxKVListKeys},
		{"MaxKVBytes", l.MaxKVBytes, 1 << 62},
	} {
		if f.v < 0 || f.v > f.limit {
			errs = append(errs, fmt.Errorf("%s is %d, must be 1 to %d", f.name, f.v, f.limit))
		}
	}
	return errs
}
