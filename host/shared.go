package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/tinyhost/tinyhost/abi"
)

// Modules of the same bytes share their code. A platform gives each tenant
// its own copy of one artifact under its own name: what is the same in
// every copy (the rewrite, wazero's decoded and compiled module, the
// descriptor) is made once and counted; what a copy owns is its name,
// limits, grants, configuration and pool.

// shared is the compiled form of one module's bytes as rewritten, held by
// every version loaded from them. The last version to let go closes it.
type shared struct {
	code          wazero.CompiledModule
	start         bool
	tableElements uint64
	took          time.Duration // wazero's compile, for the first version's observer
	// globals, tableWrites, manyGlobals and optIn are compiled's, for a
	// snapshot.
	globals     []uint32
	tableWrites bool
	manyGlobals bool
	optIn       bool

	// desc is what the first instance described, nil until then; every
	// later instance of the same code describes the same.
	desc  atomic.Pointer[described]
	ready chan struct{} // closed once compiled or failed

	key  sharedKey
	refs int // the versions that hold it; guarded by sharedSet.mu
}

// described is a descriptor with its index, made once per shared code.
type described struct {
	desc  *abi.Descriptor
	comps componentIndex
}

// sharedKey names a module's rewritten bytes by what they are made from:
// the bytes as loaded, and the options of the rewrite that vary by load or
// by test. (A module under another memory limit is rewritten anew: the
// rewrite caps its tables by the limit, which makes other bytes.)
type sharedKey struct {
	digest [32]byte
	tables uint32 // tableBudget of the load's memory limit
	poll   uint32 // pollInterval
}

// sharedSet is the host's shared code, by what it is made from.
type sharedSet struct {
	mu    sync.Mutex
	codes map[sharedKey]*shared
}

// sharedCode returns the shared code of wasm, whose SHA-256 is digest,
// rewritten for a memory limit of pages, compiling it when no version
// holds it; the caller holds a reference until it calls releaseShared.
// fresh says this load compiled it. With wasm nil, only code held already
// is returned, else errNotHeld.
// Loads of the same bytes at once compile them once: the others wait for
// that compile as long as their ctx allows, and compile themselves when it
// fails, since its failure may be its own context's.
func (h *Host) sharedCode(ctx context.Context, wasm []byte, digest [32]byte, pages uint32) (s *shared, fresh bool, err error) {
	key := sharedKey{digest: digest, tables: tableBudget(pages), poll: pollInterval}
	set := &h.shared
	for {
		set.mu.Lock()
		if set.codes == nil {
			set.codes = map[sharedKey]*shared{}
		}
		s = set.codes[key]
		if s == nil && wasm == nil {
			set.mu.Unlock()
			return nil, false, errNotHeld
		}
		if s == nil {
			break // set.mu held: this load compiles
		}
		select {
		case <-s.ready:
			s.refs++
			set.mu.Unlock()
			return s, false, nil
		default:
		}
		set.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("waiting for another load to compile the same module: %w", context.Cause(ctx))
		}
	}
	s = &shared{ready: make(chan struct{}), key: key}
	set.codes[key] = s
	set.mu.Unlock()

	c, err := h.compile(ctx, wasm, pages, &key)

	set.mu.Lock()
	defer set.mu.Unlock()
	defer close(s.ready)
	if err != nil {
		delete(set.codes, key)
		return nil, false, err
	}
	s.code, s.start, s.tableElements, s.took = c.code, c.start, c.tableElements, c.took
	s.globals, s.tableWrites, s.manyGlobals, s.optIn = c.globals, c.tableWrites, c.manyGlobals, c.optIn
	s.refs = 1
	return s, true, nil
}

// releaseShared lets go of a reference taken by sharedCode; the last one
// closes the compiled module.
func (h *Host) releaseShared(s *shared) {
	set := &h.shared
	set.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(set.codes, s.key)
	}
	set.mu.Unlock()
	if last {
		_ = s.code.Close(context.Background())
	}
}

// errNotHeld is the error of a load by digest whose code the host does
// not hold.
var errNotHeld = errors.New("no module of that digest is loaded")

// sharedCount is how many distinct compiled modules the host holds.
func (h *Host) sharedCount() int {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	return len(h.shared.codes)
}
