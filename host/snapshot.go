package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/internal/instrument"
	"github.com/tinyhost/tinyhost/host/internal/memlimit"
)

// Snapshots says which modules' instances start from a snapshot of the
// module's first instance, taken after its start function and _initialize
// (and, where that is sound, after it described the module and took the
// settings of an empty configuration), instead of running them again.
// See Options.Snapshots.
type Snapshots string

const (
	// SnapshotsOff starts every instance fresh. The default.
	SnapshotsOff Snapshots = "off"
	// SnapshotsOptIn snapshots a module whose initialisation read nothing
	// that differs from one instance to the next, and one that read
	// random_get or a clock only if it exports abi.ExportSnapshot.
	SnapshotsOptIn Snapshots = "opt-in"
	// SnapshotsAll also snapshots the modules that read random_get or a
	// clock while initialising without exporting abi.ExportSnapshot: their
	// instances share those values (a Go guest's map seeds and math/rand
	// state among them).
	SnapshotsAll Snapshots = "all"
)

func (s Snapshots) check() error {
	switch s {
	case "", SnapshotsOff, SnapshotsOptIn, SnapshotsAll:
		return nil
	}
	return fmt.Errorf("Snapshots is %q, want %q, %q or %q", string(s), SnapshotsOff, SnapshotsOptIn, SnapshotsAll)
}

func (s Snapshots) on() bool { return s == SnapshotsOptIn || s == SnapshotsAll }

// globalExportPrefix names the exports (instrument.WithGlobalExports)
// through which the host reads a module's mutable globals to snapshot
// them.
const globalExportPrefix = "tinyhost_global_"

// snapshot is a module rewritten to start initialised, and the memory its
// instances start with, shared by the versions of its key.
type snapshot struct {
	key   snapshotKey
	code  wazero.CompiledModule
	image *memlimit.Image
	// settled says its instances have taken the settings of an empty
	// configuration (capture.settle), after describing the module as desc.
	settled bool
	desc    *described
	refs    int // versions using it; guarded by Host.snapMu
}

// close releases the compiled module and the image.
func (s *snapshot) close() {
	_ = s.code.Close(context.Background())
	s.image.Close()
}

// snapshotKey is what a snapshot depends on: the module's bytes, its
// memory limit (the rewrite bounds its tables by it) and the guest log
// level (abi.EnvLogLevel) its initialisation read. An instance made while
// the level differs starts fresh. settles says whether the versions that
// use it would take their settings into it (version.settles): a version
// loaded with a configuration never starts from a snapshot holding the
// settings of none, which its fresh instances never received.
type snapshotKey struct {
	digest  string
	pages   uint32
	level   abi.LogLevel
	settles bool
}

// shareSnapshot returns the snapshot of s's key in use, or s, and counts
// the caller's version as a user of it.
func (h *Host) shareSnapshot(s *snapshot) *snapshot {
	h.snapMu.Lock()
	defer h.snapMu.Unlock()
	if have := h.snaps[s.key]; have != nil {
		s.close()
		s = have
	} else {
		if h.snaps == nil {
			h.snaps = map[snapshotKey]*snapshot{}
		}
		h.snaps[s.key] = s
	}
	s.refs++
	return s
}

// takeSnapshot returns the snapshot of key in use, if any, counting the
// caller's version as a user of it.
func (h *Host) takeSnapshot(key snapshotKey) *snapshot {
	h.snapMu.Lock()
	defer h.snapMu.Unlock()
	s := h.snaps[key]
	if s != nil {
		s.refs++
	}
	return s
}

// releaseSnapshot ends a version's use of s, and closes it after the last.
func (h *Host) releaseSnapshot(s *snapshot) {
	h.snapMu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(h.snaps, s.key)
	}
	h.snapMu.Unlock()
	if last {
		s.close()
	}
}

// capture records, for the instance a version snapshots, what its start
// function and _initialize did that a snapshot could not repeat, and then
// its state.
type capture struct {
	key snapshotKey
	on  bool // the start function or _initialize is running
	// impure is what makes the initialisation unfit to snapshot: output,
	// a sleep, a host function. "" when none.
	impure string
	// drew is the input it read that differs from one instance to the
	// next (random_get, a clock), "" when none.
	drew  string
	image *instrument.Image
	// mem is image's memory, which the instances of its snapshot start
	// with; the caller of take closes it unless a snapshot keeps it.
	mem *memlimit.Image
	// settled says image is of the instance after it described the
	// module as desc and took the settings of an empty configuration
	// (settle).
	settled bool
	desc    *described
	// plain is the capture after _initialize while the instance describes
	// the module and takes its settings (rearm), until settle decides
	// which of the two stands.
	plain *capture
}

func (c *capture) spoil(what string) {
	if c.on && c.impure == "" {
		c.impure = what
	}
}

func (c *capture) read(what string) {
	if c.on && c.drew == "" {
		c.drew = what
	}
}

// config is cfg with the instance's randomness, clocks, sleep and output
// going through c first.
func (c *capture) config(h *Host, in *instance, cfg wazero.ModuleConfig) wazero.ModuleConfig {
	return cfg.
		WithRandSource(captureRand{c}).
		WithWalltime(func() (int64, int32) { c.read("a clock"); return h.walltime() }, sys.ClockResolution(time.Microsecond)).
		WithNanotime(func() int64 { c.read("a clock"); return h.nanotime() }, 1).
		WithNanosleep(func(ns int64) { c.spoil("slept"); in.Sleep(ns) }).
		WithStdout(captureOutput{c, in.Stdout()}).
		WithStderr(captureOutput{c, in.Stderr()})
}

type captureRand struct{ c *capture }

func (r captureRand) Read(p []byte) (int, error) {
	r.c.read("random_get")
	return io.ReadFull(randReader, p)
}

type captureOutput struct {
	c *capture
	w io.Writer
}

func (o captureOutput) Write(p []byte) (int, error) {
	o.c.spoil("wrote to stdout or stderr")
	return o.w.Write(p)
}

// nanotime is the guests' monotonic clock when snapshots are on: one
// clock for every instance of the process, so that a reading a snapshot
// holds stays in the past of every instance started from it.
func (h *Host) nanotime() int64 { return int64(time.Since(h.epoch)) }

func (h *Host) walltime() (int64, int32) {
	t := time.Now()
	return t.Unix(), int32(t.Nanosecond())
}

// take reads the instance's memory and mutable globals once its
// initialisation has run.
func (c *capture) take(in *instance, globals []uint32) {
	c.on = false
	if c.impure != "" {
		return
	}
	mem, ok := in.Memory().Read(0, in.Memory().Size())
	if !ok {
		c.impure = "its memory could not be read"
		return
	}
	// Compacted below, not copied: a memory of a GiB holding a few
	// bytes costs the host those bytes.
	img := &instrument.Image{Memory: mem, Globals: make(map[uint32]uint64, len(globals))}
	for _, g := range globals {
		eg := in.Module().ExportedGlobal(globalExportPrefix + strconv.FormatUint(uint64(g), 10))
		if eg == nil {
			c.impure = "a global could not be read"
			return
		}
		img.Globals[g] = eg.Get()
	}
	img.Compact()
	// Refused before it is copied: a guest that fills its memory would
	// otherwise have the host hold a copy of it, outside every limit.
	if n := img.WrittenBytes(); n > uint64(in.v.h.opts.MaxModuleSize) {
		c.impure = fmt.Sprintf("left memory whose image is %d bytes, above MaxModuleSize", n)
		return
	}
	c.image = img
	c.mem = memlimit.NewImageWithin(mem, img.Written(), uint64(in.v.h.opts.MaxModuleSize))
}

// rearm keeps the capture taken after _initialize aside and watches the
// instance again while it describes the module (and settle delivers its
// settings): what it does then decides whether a later capture may stand.
func (c *capture) rearm() {
	if c == nil || c.image == nil {
		return // unfit already: nothing later can make it fit
	}
	plain := *c
	*c = capture{key: c.key, on: true, plain: &plain}
}

// restore drops what was captured since rearm and brings back the capture
// taken after _initialize.
func (c *capture) restore() {
	if c.mem != nil {
		c.mem.Close()
	}
	*c = *c.plain
}

// settle delivers the settings of an empty configuration to the first
// instance of a version, after it described the module, when the load's
// configuration cfg (nil: none) gives each component just that and the
// version is granted its log and configuration at most, and
// captures the instance again: the instances of a snapshot taken then
// start with their settings delivered, and a call at zero instances sends
// none (snapshot.settled). When the description or the settings did what
// a snapshot could not repeat, read what the initialisation may not
// (unfit), or were not accepted, the capture after _initialize stands and
// each instance gets its settings as it starts. An error is the
// instance's death.
func (in *instance) settle(cfg *moduleConfig) error {
	c := in.capture
	if c == nil || c.plain == nil {
		return nil
	}
	v := in.v
	if !v.settles || cfg != nil && !cfg.empty(v.desc) {
		c.restore()
		return nil
	}
	ok, err := in.deliver(noConfig)
	if err != nil || !ok {
		c.restore()
		return err
	}
	c.take(in, v.globals)
	if c.drew == "" {
		c.drew = c.plain.drew
	}
	if c.image == nil || v.unfit(c) != "" {
		c.restore()
		return nil
	}
	c.plain.mem.Close()
	c.plain, c.settled, c.desc = nil, true, &described{desc: v.desc, comps: v.comps}
	return nil
}

// dropCapture releases what the instance captured for a snapshot that
// will not be built (its load failed before).
func (in *instance) dropCapture() {
	if c := in.capture; c != nil {
		if c.plain != nil {
			c.restore()
		}
		if c.mem != nil {
			c.mem.Close()
		}
	}
	in.capture, in.Spoil = nil, nil
}

// unfit is why the version's instances may not start from what c
// captured, or "".
func (v *version) unfit(c *capture) string {
	switch {
	case v.tableWrites:
		return "its code can change tables"
	case v.manyGlobals:
		return fmt.Sprintf("it defines more than %d mutable globals", instrument.MaxGlobalExports)
	case c.impure != "":
		return "its initialisation " + c.impure
	case c.drew != "" && v.h.opts.Snapshots != SnapshotsAll && !v.optIn:
		return "its initialisation read " + c.drew + " and it does not export " + abi.ExportSnapshot
	}
	return ""
}

// snapshot builds the version's snapshot from what its first instance
// captured, when that is sound; otherwise its instances start fresh. A
// snapshot that cannot be built is never the load's failure.
func (v *version) snapshot(ctx context.Context, first *instance) {
	src := v.src
	v.src = nil
	if first == nil {
		// A copy of described code, started with none (describeFirst):
		// its instances start from the snapshot of its code in use, if
		// any.
		if src != nil {
			v.snap = v.h.takeSnapshot(snapshotKey{digest: v.digest, pages: v.limits.MemoryPages, level: v.guestLogLevel(), settles: v.settles})
		}
		return
	}
	c := first.capture
	first.capture, first.Spoil = nil, nil
	if c == nil {
		return
	}
	if reason := v.unfit(c); reason != "" {
		if c.mem != nil {
			c.mem.Close()
		}
		v.logger().Info("instances start fresh", "reason", reason)
		return
	}
	wasm, err := instrument.Snapshot(src, c.image)
	if err == nil && int64(len(wasm)) > v.h.opts.MaxModuleSize {
		err = fmt.Errorf("the snapshot's %d bytes exceed MaxModuleSize", len(wasm))
	}
	if err == nil {
		var cc *compiled
		before := cacheEntries(v.h.opts.CacheDir)
		cc, err = v.h.compile(ctx, wasm, v.limits.MemoryPages, nil)
		v.h.dropRepeatedEntries(before)
		if err == nil {
			v.snap = v.h.shareSnapshot(&snapshot{key: c.key, code: cc.code, image: c.mem, settled: c.settled, desc: c.desc})
			v.logger().Info("instances start from a snapshot", "pages", c.image.Pages(), "image_bytes", c.image.WrittenBytes(),
				"mapped", c.mem.Mapped(), "settled", v.snap.settled, "bytes", len(wasm))
			return
		}
	}
	c.mem.Close()
	v.logger().Warn("instances start fresh: no snapshot", "error", err)
}

// startCode is the compiled module an instance starts from, and whether
// it is the snapshot. The version's first instance takes the snapshot of
// the same bytes in use, if there is one; else it is the one captured
// (in.capture).
func (v *version) startCode(in *instance, level abi.LogLevel) (wazero.CompiledModule, bool) {
	if v.src != nil && v.snap == nil && v.desc == nil {
		key := snapshotKey{digest: v.digest, pages: v.limits.MemoryPages, level: level, settles: v.settles}
		if v.snap = v.h.takeSnapshot(key); v.snap != nil {
			v.src = nil
		} else {
			in.capture = &capture{key: key, on: true}
		}
	}
	if s := v.snap; s != nil && s.key.level == level {
		in.Allocator().Start(s.image)
		return s.code, true
	}
	return v.compiled, false
}

// cacheEntries lists the entries of the on-disk compilation cache in dir
// (none when dir is ""), with their sizes.
func cacheEntries(dir string) map[string]int64 {
	if dir == "" {
		return nil
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	out := make(map[string]int64, len(paths))
	for _, p := range paths {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && !strings.HasSuffix(p, ".tmp") {
			out[p] = fi.Size()
		}
	}
	return out
}

// dropRepeatedEntries removes the entries added to the on-disk compilation
// cache since before that repeat an older entry byte for byte. A
// snapshot's module has the code of the module it was taken of, so its
// compiled code is the same, under a key of its own (its bytes, which
// differ with every snapshot): kept, such entries would grow the cache by
// a module's compiled code with every load, and never be read again.
func (h *Host) dropRepeatedEntries(before map[string]int64) {
	if before == nil {
		return
	}
	for p, size := range cacheEntries(h.opts.CacheDir) {
		if _, old := before[p]; old {
			continue
		}
		for q, qsize := range before {
			if qsize == size && filepath.Dir(q) == filepath.Dir(p) && sameContent(p, q) {
				if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					h.log.Warn("compilation cache: a snapshot's entry cannot be removed", "file", p, "error", err)
				}
				break
			}
		}
	}
}

// sameContent reports whether the files at a and b hold the same bytes.
// Both are opened only as regular files, without blocking (openRegular):
// the entries were listed before the compile, and a FIFO planted in the
// place of one since would otherwise hold the load until a writer came.
func sameContent(a, b string) bool {
	fa, _, err := openRegular(a)
	if err != nil {
		return false
	}
	defer fa.Close()
	fb, _, err := openRegular(b)
	if err != nil {
		return false
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return errors.Is(ea, io.ErrUnexpectedEOF) || errors.Is(ea, io.EOF)
		}
	}
}
