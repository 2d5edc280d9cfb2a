package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/internal/instrument"
)

// The rewrite of a module (instrument.Rewrite) is kept in CacheDir beside
// its compiled code, so that a module loaded again in the same process
// (a file dropped anew, a module unloaded and loaded back) skips it. What
// is on disk is never trusted on its own: an entry is used only when its
// bytes hash to what this process recorded in memory when it wrote them,
// with the rest of the rewrite's result. Anything else (an entry planted,
// truncated or left by an earlier process) is a miss: the module is
// rewritten, and the entry written anew.

// rewriteVersion names the rewrite's output: raise it whenever instrument
// writes other bytes for the same input and options.
const rewriteVersion = 1

// rewriteKey names a rewrite by what it is made from.
type rewriteKey struct {
	sharedKey
	globals bool // instrument.WithGlobalExports (Options.Snapshots)
}

func (k rewriteKey) file() string {
	g := 0
	if k.globals {
		g = 1
	}
	return fmt.Sprintf("%s-t%d-p%d-g%d.wasm", hex.EncodeToString(k.digest[:]), k.tables, k.poll, g)
}

// rewriteEntry is what the process knows of an entry it wrote: the
// SHA-256 and size of its bytes, and the rest of the rewrite's result.
type rewriteEntry struct {
	sum  [32]byte
	size int64
	res  instrument.Result // Wasm nil
	used uint64            // for eviction, least recently used first
}

// rewriteCache is the host's record of the rewrites it keeps on disk.
type rewriteCache struct {
	mu      sync.Mutex
	entries map[rewriteKey]*rewriteEntry
	bytes   int64
	clock   uint64
	cleared bool // the directory was emptied of earlier processes' entries
	hits    int  // rewrites taken from disk
}

// rewriteDir is where the rewrites are kept, "" for nowhere.
func (h *Host) rewriteDir() string {
	if h.opts.CacheDir == "" || h.opts.RewriteCacheBytes < 0 {
		return ""
	}
	return filepath.Join(h.opts.CacheDir, fmt.Sprintf("tinyhost-rewrite-v%d", rewriteVersion))
}

// cachedRewrite returns the rewrite of key kept on disk, when its size
// is the one this process recorded, and check, which reports whether its
// bytes are those recorded (forgetting the entry when not). The caller
// may compile the bytes while check runs, on another core, but must use
// nothing it made of them unless check reports true. With key nil, or no
// entry, it returns nil.
func (h *Host) cachedRewrite(key *rewriteKey) (res *instrument.Result, check func() bool) {
	dir := h.rewriteDir()
	if dir == "" || key == nil {
		return nil, nil
	}
	c := &h.rewrites
	c.mu.Lock()
	e := c.entries[*key]
	if e == nil {
		c.mu.Unlock()
		return nil, nil
	}
	c.clock++
	e.used = c.clock
	meta := e.res
	c.mu.Unlock()

	path := filepath.Join(dir, key.file())
	b, err := readAtMost(path, e.size)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		h.forgetRewrite(*key, e, "")
		return nil, nil
	case err != nil && transientFileError(err):
		// No descriptor left, a full disk: the entry stays.
		h.log.Warn("rewrite cache: an entry cannot be read; rewriting", "file", path, "error", err)
		return nil, nil
	case err != nil, int64(len(b)) != e.size:
		// Not a regular file, a directory in its place, cut short.
		h.changedRewrite(*key, e, path)
		return nil, nil
	}
	meta.Wasm = b
	return &meta, func() bool {
		if sha256.Sum256(b) != e.sum {
			h.changedRewrite(*key, e, path)
			return false
		}
		c.mu.Lock()
		c.hits++
		c.mu.Unlock()
		return true
	}
}

// changedRewrite forgets and removes an entry whose bytes are not those
// written.
func (h *Host) changedRewrite(key rewriteKey, e *rewriteEntry, path string) {
	h.log.Warn("rewrite cache: an entry is not what was written; rewriting", "file", path)
	h.forgetRewrite(key, e, path)
}

// readAtMost reads the file at path, or its first size+1 bytes: enough to
// tell that it is longer than size without holding more. Only a regular
// file, opened without blocking (openRegular): a FIFO planted there would
// otherwise hold the compile slot forever.
func readAtMost(path string, size int64) ([]byte, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(io.LimitReader(f, size+1), size)
}

// readAll is io.ReadAll into a buffer made for size bytes and the EOF
// after them: a module read whole is copied once, not grown into.
func readAll(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// forgetRewrite drops the record e of key, if it is still the one, and
// removes the file at path (none when "").
func (h *Host) forgetRewrite(key rewriteKey, e *rewriteEntry, path string) {
	c := &h.rewrites
	c.mu.Lock()
	if c.entries[key] == e {
		delete(c.entries, key)
		c.bytes -= e.size
	}
	c.mu.Unlock()
	if path != "" {
		h.removeRewrite(path)
	}
}

func (h *Host) removeRewrite(path string) {
	// RemoveAll: a directory may have been put in an entry's place.
	if err := os.RemoveAll(path); err != nil {
		h.log.Warn("rewrite cache: an entry cannot be removed", "file", path, "error", err)
	}
}

// keepRewrite writes res's module to disk under key (to a temporary file
// renamed into place, so that no reader sees it half written) and records
// it, evicting the least recently used entries beyond RewriteCacheBytes
// (or maxRewriteEntries).
// A rewrite that cannot be kept is only logged: the load goes on.
func (h *Host) keepRewrite(key rewriteKey, res *instrument.Result) {
	dir := h.rewriteDir()
	size := int64(len(res.Wasm))
	if dir == "" {
		return
	}
	c := &h.rewrites
	c.mu.Lock()
	if !c.cleared {
		// Before the bound is looked at: what an earlier process kept
		// goes even when this one keeps nothing.
		h.clearRewrites()
		c.cleared = true
	}
	c.mu.Unlock()
	if size > h.opts.RewriteCacheBytes {
		return
	}
	// Written unlocked: the rewrite is the same bytes whoever writes it.
	if err := writeAtomic(dir, key.file(), res.Wasm); err != nil {
		h.log.Warn("rewrite cache: not written (full or read-only?)", "dir", dir, "error", err)
		return
	}
	sum := sha256.Sum256(res.Wasm)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[key]; old != nil {
		c.bytes -= old.size
	}
	if c.entries == nil {
		c.entries = map[rewriteKey]*rewriteEntry{}
	}
	// Of the lists, only what a load from the cache reads: the interface
	// was checked when the entry was written, and a module's export and
	// import lists can be several times its size.
	meta := *res
	meta.Wasm, meta.Imports, meta.Exports = nil, nil, nil
	if i := slices.IndexFunc(res.Exports, func(e instrument.Export) bool { return e.Name == abi.ExportSnapshot }); i >= 0 {
		meta.Exports = []instrument.Export{res.Exports[i]}
	}
	c.clock++
	c.entries[key] = &rewriteEntry{sum: sum, size: size, res: meta, used: c.clock}
	c.bytes += size
	for c.bytes > h.opts.RewriteCacheBytes || len(c.entries) > maxRewriteEntries {
		var lk rewriteKey
		var le *rewriteEntry
		for k, e := range c.entries {
			if le == nil || e.used < le.used {
				lk, le = k, e
			}
		}
		delete(c.entries, lk)
		c.bytes -= le.size
		h.removeRewrite(filepath.Join(dir, lk.file()))
	}
}

// clearRewrites removes the rewrites earlier processes kept in CacheDir,
// of every rewrite version: they cannot be checked, and nothing else
// bounds them. With the cache off (RewriteCacheBytes < 0), New calls it.
func (h *Host) clearRewrites() {
	if h.opts.CacheDir == "" {
		return
	}
	old, _ := filepath.Glob(filepath.Join(h.opts.CacheDir, "tinyhost-rewrite-v*"))
	for _, dir := range old {
		if err := os.RemoveAll(dir); err != nil {
			h.log.Warn("rewrite cache: an earlier process's entries cannot be removed", "dir", dir, "error", err)
		}
	}
}

// writeAtomic writes b to dir/name through a temporary file renamed into
// place.
func writeAtomic(dir, name string, b []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// maxRewriteEntries bounds the entries kept however small, and so the
// host's record of them.
const maxRewriteEntries = 4096

// defaultRewriteCacheBytes is Options.RewriteCacheBytes's default: the
// rewrites of some tens of Go modules.
const defaultRewriteCacheBytes = 256 << 20

// compiledNames are the entries of the compilation cache in CacheDir, by
// path (names only: a listing cheap enough to take before a compile).
func (h *Host) compiledNames() map[string]bool {
	if h.opts.CacheDir == "" {
		return nil
	}
	paths, _ := filepath.Glob(filepath.Join(h.opts.CacheDir, "wazero-*", "*"))
	names := make(map[string]bool, len(paths))
	for _, p := range paths {
		names[p] = true
	}
	return names
}

// removeCompiledSince removes the entries of the compilation cache added
// since before (compiledNames) by the compile of a changed rewrite: code
// of bytes no load will compile again. An entry another compile added
// meanwhile goes too, which costs that module a compile at its next load;
// an entry is found changed only when something else wrote to CacheDir.
func (h *Host) removeCompiledSince(before map[string]bool) {
	if before == nil {
		return
	}
	paths, _ := filepath.Glob(filepath.Join(h.opts.CacheDir, "wazero-*", "*"))
	for _, p := range paths {
		if before[p] || strings.HasSuffix(p, ".tmp") {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("compilation cache: the code of a changed rewrite cannot be removed", "file", p, "error", err)
		}
	}
}
