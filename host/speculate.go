package host

import (
	"context"
	"errors"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
)

// A file dropped into the modules directory is often a module the host
// loaded before (moved back, dropped again, restored): its rewrite is kept
// (rewritecache.go), and compiling that is mostly wazero decoding,
// validating and reading compiled code from its cache. That compile needs
// neither the SHA-256 of the file nor the check of the kept bytes, which
// may run beside it on another core: speculate starts it as soon as the
// file is read, on the entry kept for a module of the same fingerprint
// (inputPrint). What it makes is taken only by the compile of that very
// entry's key, so of a module of the file's digest, and only once the
// entry's bytes are checked (compileRewrite); anything else is closed
// unused.

// speculate compiles the kept rewrite of wasm, a module read from the
// modules directory to be loaded under the host's default limits, and
// leaves it for the compile of that entry's key to take (takeSpeculation).
// It does nothing when there is no such entry, the host holds its code
// already, or no compile slot or budget is free now: a speculation never
// waits for one, nor holds one up for a load that does. The caller runs it
// while it hashes wasm on another goroutine, so that the compile, which
// decides when the module answers, is the one that goes on at once; and
// calls dropSpeculation once its load is done.
func (h *Host) speculate(ctx context.Context, wasm []byte, fp uint64) (key rewriteKey, ok bool) {
	if h.rewriteDir() == "" {
		return key, false
	}
	like := rewriteKey{sharedKey: sharedKey{tables: tableBudget(h.opts.Limits.MemoryPages), poll: pollInterval}, globals: h.opts.Snapshots.on()}
	if key, ok = h.rewriteByPrint(fp, like); !ok {
		return key, false
	}
	h.shared.mu.Lock()
	_, held := h.shared.codes[key.sharedKey]
	h.shared.mu.Unlock()
	if held {
		return key, false // the load takes the held code: no compile
	}
	ctx, stop := h.loadContext(ctx)
	defer stop()
	release, err := h.takeCompile(ctx, wasm, false)
	if err != nil {
		return key, false
	}
	cctx, cancel := context.WithTimeoutCause(ctx, h.opts.CompileTimeout, &compileTimeoutError{h.opts.CompileTimeout})
	c, err := h.compileKept(cctx, key)
	cancel()
	release()
	if err != nil {
		h.log.Debug("rewrite cache: the compile begun early failed", "error", api.GuestText(err.Error()))
		return key, false
	}
	r := &h.rewrites
	r.mu.Lock()
	if r.specs == nil {
		r.specs = map[rewriteKey]*compiled{}
	}
	old := r.specs[key]
	r.specs[key] = c
	r.specsMade++
	r.mu.Unlock()
	if old != nil {
		// Another file of the same bytes dropped at once: its load takes
		// this one.
		_ = old.code.Close(context.Background())
	}
	return key, true
}

// errNotKept is compileKept's error when the entry is gone or unreadable.
var errNotKept = errors.New("the rewrite is no longer kept")

// compileKept compiles the kept rewrite of key, checking its bytes
// meanwhile. A panic is an error, as in compileNow.
func (h *Host) compileKept(ctx context.Context, key rewriteKey) (c *compiled, err error) {
	defer guest.Recovered(h.log, "compile", &err)
	if hook := guest.PanicHook.Load(); hook != nil {
		(*hook)("compile")
	}
	res, check := h.cachedRewrite(&key)
	if res == nil {
		return nil, errNotKept
	}
	code, took, err := h.compileRewrite(ctx, res, check)
	if err != nil {
		return nil, err
	}
	return newCompiled(code, took, res), nil
}

// takeSpeculation returns the compile speculated of key's entry, its bytes
// checked, or nil when there is none.
func (h *Host) takeSpeculation(key rewriteKey) *compiled {
	r := &h.rewrites
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.specs[key]
	delete(r.specs, key)
	if c != nil {
		r.specsTaken++
	}
	return c
}

// dropSpeculation closes the compile speculated of key unless a load took
// it.
func (h *Host) dropSpeculation(key rewriteKey) {
	r := &h.rewrites
	r.mu.Lock()
	c := r.specs[key]
	delete(r.specs, key)
	r.mu.Unlock()
	if c != nil {
		_ = c.code.Close(context.Background())
	}
}
