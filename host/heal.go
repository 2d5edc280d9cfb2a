package host

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
)

// Faults that heal. A host runs for months: a descriptor limit reached for
// a moment, a full disk, a cache entry cut short by a crash must not fail a
// module for good, nor be blamed on it.

// openCompilationCache is the compilation cache in dir, or, when dir
// cannot be used (not writable, not a directory), one in memory: the host
// serves all the same, compiling each module once per start.
func openCompilationCache(dir string, log hclog.Logger) wazero.CompilationCache {
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		log.Warn("compilation cache unusable: compiling in memory, every start", "dir", dir, "error", err)
		return wazero.NewCompilationCache()
	}
	return c
}

// compileModule is wazero's CompileModule, healing what the compilation
// cache did to it. wazero fails a compile whose cache entry it cannot read
// or parse, and one whose entry it cannot write, though the module
// compiled (and is kept in memory). A corrupt entry is removed, logged,
// and the module compiled again; an entry not written is logged, and the
// compile asked again, which memory answers.
func (h *Host) compileModule(ctx context.Context, wasm []byte) (wazero.CompiledModule, error) {
	code, err := h.rt.CompileModule(ctx, wasm)
	if err == nil || h.opts.CacheDir == "" || ctx.Err() != nil {
		return code, err
	}
	dir, aerr := filepath.Abs(h.opts.CacheDir)
	if aerr != nil {
		return nil, err
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case strings.Contains(err.Error(), "compilationcache:"):
		// A parse error: wazero does not say which entry.
		if removeCorruptEntries(dir, h.log) == 0 {
			return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
		}
	case errors.As(err, &pe) && within(dir, pe.Path) && pe.Op == "open" && !strings.HasSuffix(pe.Path, ".tmp"):
		if transientFileError(err) {
			return nil, err // try again later, the entry is not at fault
		}
		// An entry that cannot be opened (a permission, a directory in
		// its place): it goes.
		if rerr := os.RemoveAll(pe.Path); rerr != nil {
			return nil, fmt.Errorf("compilation cache entry %s cannot be read nor removed: %w", pe.Path, err)
		}
		h.log.Warn("compilation cache: removed an entry that could not be read; compiling again", "file", pe.Path, "error", err)
	case errors.As(err, &pe) && within(dir, pe.Path), errors.As(err, &le) && within(dir, le.Old):
		h.log.Warn("compilation cache not written (full or read-only?): the module is compiled and served from memory", "dir", dir, "error", err)
	default:
		return nil, err
	}
	return h.rt.CompileModule(ctx, wasm)
}

// within reports whether path is under dir.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// removeCorruptEntries removes the entries of the compilation cache in dir
// that do not parse (cacheEntryError), logging each, and returns how many
// it removed.
func removeCorruptEntries(dir string, log hclog.Logger) int {
	subs, err := filepath.Glob(filepath.Join(dir, "wazero-*"))
	if err != nil {
		return 0
	}
	removed := 0
	for _, sub := range subs {
		entries, err := os.ReadDir(sub)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), ".tmp") {
				continue
			}
			path := filepath.Join(sub, e.Name())
			reason := cacheEntryError(path, strings.TrimPrefix(filepath.Base(sub), "wazero-"))
			if reason == nil {
				continue
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				log.Error("compilation cache: a corrupt entry cannot be removed", "file", path, "reason", reason, "error", err)
				continue
			}
			log.Warn("compilation cache: removed a corrupt entry; the module compiles again", "file", path, "reason", reason)
			removed++
		}
	}
	return removed
}

// cacheEntryError says why the compilation-cache entry at path does not
// parse, or nil. dirTag is the entry's directory name after "wazero-":
// "<version>-<arch>-<os>". The layout is wazero's (engine_cache.go of its
// optimizing compiler): "WAZEVO", the version (a length byte and the
// string), the function count (u32) and offsets (u64 each), the code
// length (u64), the code and its CRC-32C (u32), a source-map flag (and the
// map: a u64 count of u64 pairs), then the catch-clause table (u32 count;
// each a u32 count of 5-byte clauses). Integers are little-endian.
func cacheEntryError(path, dirTag string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	r := &entryReader{r: bufio.NewReader(f), left: st.Size()}
	if magic := r.bytes(6); string(magic) != "WAZEVO" {
		return r.fail("no WAZEVO header")
	}
	version := string(r.bytes(int64(r.u8())))
	if r.err == nil && !strings.HasPrefix(dirTag, version+"-") {
		return r.fail(fmt.Sprintf("version %q in the directory of %q", version, dirTag))
	}
	fns := r.u32()
	r.bytes(8 * int64(fns))
	code := r.bytes(int64(r.u64()))
	if sum := r.u32(); r.err == nil && sum != crc32.Checksum(code, crc32.MakeTable(crc32.Castagnoli)) {
		return r.fail("code checksum mismatch")
	}
	if r.u8() == 1 {
		r.bytes(16 * int64(r.u64()))
	}
	if r.err == nil && r.left == 0 {
		return nil // an entry of before the catch-clause table: wazero recompiles it
	}
	for range r.u32() {
		r.bytes(5 * int64(r.u32()))
		if r.err != nil {
			break
		}
	}
	if r.err == nil && r.left != 0 {
		return r.fail(fmt.Sprintf("%d bytes after the end", r.left))
	}
	return r.err
}

// entryReader reads a cache entry, failing at the first read past its end.
type entryReader struct {
	r    *bufio.Reader
	left int64
	err  error
}

func (r *entryReader) fail(why string) error {
	if r.err == nil {
		r.err = errors.New(why)
	}
	return r.err
}

// bytes reads n bytes; none when n is past what is left.
func (r *entryReader) bytes(n int64) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left {
		_ = r.fail(fmt.Sprintf("truncated: %d bytes wanted, %d left", n, r.left))
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		_ = r.fail(err.Error())
		return nil
	}
	r.left -= n
	return b
}

func (r *entryReader) u8() uint8 {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *entryReader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *entryReader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// transientFileError reports whether err is a file error that passes by
// itself: descriptors or memory exhausted, a full disk, a permission that
// is being fixed, an interrupted call.
func transientFileError(err error) bool {
	for _, errno := range []syscall.Errno{
		syscall.EMFILE, syscall.ENFILE, syscall.ENOSPC, syscall.EDQUOT, syscall.ENOMEM,
		syscall.EAGAIN, syscall.EINTR, syscall.EACCES, syscall.EPERM, syscall.EBUSY, syscall.EIO,
	} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}
