package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/watch"
)

// dirQuiet is how long a file in the modules directory must be left alone
// before it is loaded: a file being copied in arrives in several writes.
var dirQuiet = 150 * time.Millisecond

// ErrNotRegular is matched by the error of a module file that is not a
// regular file (a FIFO, a device, a socket, a directory), or a symbolic link
// to one. Such a file is never opened for reading.
var ErrNotRegular = errors.New("not a regular file")

// dirScanRetries is how many times in a row New's scan waits for a file
// that changes while it is read.
const dirScanRetries = 10

// errChanged says that a file changed while it was read: it is read again
// once it has been quiet.
var errChanged = errors.New("changed while read")

// dirLoader keeps the modules of Options.ModulesDir in step with its
// *.wasm and *.ref files. Each file has a worker of its own while it has
// work, so that a slow or hostile file (a fetch that drips, a long
// compile) never holds up another, and the changes of one file are synced
// in order. Workers and the event loop are counted in the host's wait
// group; they stop when the host's loads stop (Close).
type dirLoader struct {
	h   *Host
	dir string
	w   *watch.Watcher

	mu    sync.Mutex
	files map[string]dirFile  // by path: the module each file loaded
	work  map[string]*dirWork // by path: the file's worker, while it runs

	// held bounds the bytes of module files the workers hold at once,
	// fetched those of the modules that reference files name.
	held, fetched fileBytes
}

// dirHeldFiles is how many module files of MaxModuleSize bytes the
// workers of the modules directory hold at once, from before they read
// one until its load is done, and how many modules that reference files
// name, from before the fetch: a worker each, a thousand files at once
// (sparse, they cost the disk nothing; references to a module the
// fetcher has cached cost no request) would otherwise have the host hold
// a thousand times MaxModuleSize, outside every bound.
var dirHeldFiles int64 = 4

// timesHeld is dirHeldFiles times size, or the most an int64 holds.
func timesHeld(size int64) int64 {
	if size > math.MaxInt64/dirHeldFiles {
		return math.MaxInt64
	}
	return size * dirHeldFiles
}

// fileBytes is a count of bytes held, bounded: take waits for room.
type fileBytes struct {
	mu    sync.Mutex
	held  int64
	max   int64
	freed chan struct{} // closed, and replaced, when bytes are given back
}

// take counts n bytes, at most max, once they fit, waiting as long as
// ctx allows, and returns the function that gives them back.
func (b *fileBytes) take(ctx context.Context, n int64) (func(), error) {
	n = min(n, b.max)
	for {
		b.mu.Lock()
		if n <= b.max-b.held {
			b.held += n
			b.mu.Unlock()
			return func() {
				b.mu.Lock()
				b.held -= n
				if b.freed != nil {
					close(b.freed)
					b.freed = nil
				}
				b.mu.Unlock()
			}, nil
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

type dirFile struct {
	module string
	digest string
	source string // the module's Source: the file, or what a ref file names
}

// dirWork is a file's pending work.
type dirWork struct {
	again   bool              // sync (once more) before the worker ends
	waiters []*sync.WaitGroup // told when the next sync is done
}

func isModuleFile(name string) bool {
	return (strings.HasSuffix(name, ".wasm") || strings.HasSuffix(name, api.RefFileExt)) &&
		!strings.HasPrefix(name, ".")
}

// startDir watches dir, loads the files it holds (in parallel, until they
// are loaded or refused, or ctx ends), then follows changes.
func startDir(ctx context.Context, h *Host, dir string) (*dirLoader, error) {
	// Watch first, so that nothing changed during the scan is missed.
	w, err := watch.New(dir, dirQuiet, isModuleFile)
	if err != nil {
		return nil, err
	}
	d := &dirLoader{h: h, dir: dir, w: w, files: map[string]dirFile{}, work: map[string]*dirWork{}}
	d.held.max = timesHeld(max(h.opts.MaxModuleSize, api.MaxRefFileSize))
	d.fetched.max = timesHeld(h.opts.MaxModuleSize)
	var scan sync.WaitGroup
	if err := d.rescan(&scan); err != nil {
		w.Close()
		return nil, err
	}
	h.wg.Add(1)
	go d.run()
	done := make(chan struct{})
	go func() {
		scan.Wait()
		close(done)
	}()
	select {
	case <-done:
		return d, nil
	case <-ctx.Done():
		return d, fmt.Errorf("loading the files present: %w", context.Cause(ctx))
	}
}

// rescan syncs every module file of the directory, and every file known to
// have held a module (it may be gone).
func (d *dirLoader) rescan(scan *sync.WaitGroup) error {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return err
	}
	paths := map[string]bool{}
	for _, e := range entries {
		if isModuleFile(e.Name()) {
			paths[filepath.Join(d.dir, e.Name())] = true
		}
	}
	d.mu.Lock()
	for p := range d.files {
		paths[p] = true
	}
	d.mu.Unlock()
	for p := range paths {
		d.enqueue(p, scan)
	}
	return nil
}

func (d *dirLoader) run() {
	defer d.h.wg.Done()
	for {
		select {
		case c, ok := <-d.w.Changes():
			if !ok {
				return
			}
			d.enqueue(c.Path, nil)
		case err := <-d.w.Errors():
			// Events may have been lost (a queue overflow): look again.
			d.h.log.Warn("modules directory: rescanning", "dir", d.dir, "error", err)
			if err := d.rescan(nil); err != nil {
				d.h.log.Error("modules directory", "dir", d.dir, "error", err)
			}
		}
	}
}

// close stops watching. Workers stop with the host's loads; Close waits for
// them through the host's wait group.
func (d *dirLoader) close() {
	_ = d.w.Close()
}

// enqueue asks for a sync of path, starting the file's worker when it has
// none. scan, when not nil, is told when that sync is done. It never
// blocks, so the event loop keeps reading events.
func (d *dirLoader) enqueue(path string, scan *sync.WaitGroup) {
	if scan != nil {
		scan.Add(1)
	}
	d.mu.Lock()
	w, running := d.work[path]
	if !running {
		w = &dirWork{}
		d.work[path] = w
	}
	w.again = true
	if scan != nil {
		w.waiters = append(w.waiters, scan)
	}
	d.mu.Unlock()
	if !running {
		d.h.wg.Add(1) // from New or the event loop, which the group counts
		go d.worker(path, w)
	}
}

// worker syncs path for as long as changes come; once the host's loads
// stop, what is pending is dropped.
func (d *dirLoader) worker(path string, w *dirWork) {
	defer d.h.wg.Done()
	ctx := d.h.loadCtx
	var (
		waiters []*sync.WaitGroup
		backoff time.Duration
	)
	for retries := 0; ; {
		d.mu.Lock()
		waiters = append(waiters, w.waiters...)
		w.waiters = nil
		if !w.again || ctx.Err() != nil {
			delete(d.work, path)
			d.mu.Unlock()
			for _, s := range waiters {
				s.Done()
			}
			return
		}
		w.again = false
		d.mu.Unlock()

		// A file that changed while read is read again once it is quiet,
		// whether or not the watcher saw the writes. The scan of New waits
		// for a file being written, but not for ever. A transient error
		// (no descriptor left, a full disk) is tried again after a backoff
		// that doubles up to dirRetryMax; the scan of New does not wait
		// for it.
		res := d.sync(ctx, path, backoff)
		retry := res == syncChanged
		if retry {
			retries++
		} else {
			retries = 0
		}
		wait := dirQuiet
		if res == syncTransient {
			backoff = min(max(2*backoff, dirRetryMin), dirRetryMax)
			wait = backoff
		} else {
			backoff = 0
		}
		if res != synced {
			d.mu.Lock()
			w.again = true
			d.mu.Unlock()
		}
		if !retry || retries >= dirScanRetries {
			for _, s := range waiters {
				s.Done()
			}
			waiters = nil
		}
		if res != synced {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
}

// The backoff of a file that failed on a transient error.
var (
	dirRetryMin = 250 * time.Millisecond
	dirRetryMax = 30 * time.Second
)

// syncResult is what became of a sync.
type syncResult int

const (
	synced        syncResult = iota // loaded, unloaded, or failed for good
	syncChanged                     // the file changed while read: again once quiet
	syncTransient                   // a transient error: again after a backoff
)

// sync brings the module of one file in step with the file: load it when it
// is new or changed, unload its module when it is gone. backoff is how
// long the last try, which failed on a transient error, was waited for (0
// for none), to log.
func (d *dirLoader) sync(ctx context.Context, path string, backoff time.Duration) syncResult {
	h := d.h
	d.mu.Lock()
	prev, known := d.files[path]
	d.mu.Unlock()
	limit := h.opts.MaxModuleSize
	if strings.HasSuffix(path, api.RefFileExt) {
		limit = api.MaxRefFileSize
	}
	// The file's bytes are counted from before it is opened (a worker
	// waiting for room holds no descriptor) until its load is done.
	var release func()
	b, err := readModuleFile(path, limit, dirQuiet, func(n int64) error {
		var err error
		release, err = d.held.take(ctx, n)
		return err
	})
	if release != nil {
		defer release()
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return synced // the host's loads stopped
	case errors.Is(err, fs.ErrNotExist):
		if known {
			d.mu.Lock()
			delete(d.files, path)
			d.mu.Unlock()
			if err := h.unload(prev.module, prev.source); err == nil {
				h.log.Info("module file removed", "file", api.GuestText(path), "module", prev.module)
			}
		}
		return synced
	case errors.Is(err, errChanged):
		h.log.Debug("module file changed while read; reading it again once quiet", "file", api.GuestText(path))
		return syncChanged
	case transientFileError(err):
		d.retrying(path, backoff, err)
		return syncTransient
	case err != nil:
		d.failed(path, known, &api.LoadError{File: path, Kind: kindOf(err), Err: err})
		return synced
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	if known && prev.digest == digest {
		return synced
	}
	source := path
	if strings.HasSuffix(path, api.RefFileExt) {
		// A reference file names the module; its bytes come from the
		// registry or the cache, and the module's digest is theirs.
		src, err := api.ParseRefFile(b)
		if err == nil {
			// What a fetch returns is counted apart from the files,
			// as MaxModuleSize before it is known: a fetch that drips
			// holds up other references only, and for its deadline.
			var done func()
			if done, err = d.fetched.take(ctx, h.opts.MaxModuleSize); err != nil {
				return synced // the host's loads stopped
			}
			defer done()
			b, err = h.fetch(ctx, src)
			source = src.String()
		}
		if err != nil {
			d.failed(path, known, &api.LoadError{File: path, Err: err})
			return synced
		}
		sum = sha256.Sum256(b)
	}
	// The file's digest is the module's: a .wasm is hashed once per sync.
	info, err := h.loadDigest(ctx, sum, b, source, LoadOptions{})
	if err != nil && transientFileError(err) && ctx.Err() == nil {
		d.retrying(path, backoff, err)
		return syncTransient
	}
	if err != nil {
		d.logFailed(path, known, err) // load published the event
		return synced
	}
	d.mu.Lock()
	d.files[path] = dirFile{module: info.Name, digest: digest, source: source}
	d.mu.Unlock()
	if known && prev.module != info.Name {
		// The file now holds another module: the old one goes.
		_ = h.unload(prev.module, prev.source)
	}
	if backoff > 0 {
		h.log.Info("module file loaded after a transient error", "file", api.GuestText(path), "module", info.Name)
	}
	return synced
}

// retrying logs a file that failed on a transient error and is tried
// again: at warn the first time, at debug while it keeps failing.
func (d *dirLoader) retrying(path string, backoff time.Duration, err error) {
	next := min(max(2*backoff, dirRetryMin), dirRetryMax)
	// The file's name, in the error too, is any bytes.
	file, msg := api.GuestText(path), api.GuestText(err.Error())
	if backoff == 0 {
		d.h.log.Warn("module file not loaded: a transient error, trying again", "file", file, "error", msg, "in", next)
		return
	}
	d.h.log.Debug("module file still not loaded: trying again", "file", file, "error", msg, "in", next)
}

// failed reports a file that could not be read or fetched, as a bad .wasm
// is: an EventFailed and a log line.
func (d *dirLoader) failed(path string, known bool, lerr *api.LoadError) {
	d.h.events.publish(Event{Type: EventFailed, Source: path, Err: lerr})
	d.logFailed(path, known, lerr)
}

func (d *dirLoader) logFailed(path string, known bool, err error) {
	// The error may quote the module (its descriptor, its stderr), and
	// the file's name is any bytes.
	file, msg := api.GuestText(path), api.GuestText(err.Error())
	if known {
		d.h.log.Error("module file not loaded; the previous version keeps serving", "file", file, "error", msg)
	} else {
		d.h.log.Error("module file not loaded", "file", file, "error", msg)
	}
}

// openRegular opens path for reading without blocking (a FIFO or a
// device planted there would otherwise hold the open), and only if it is
// a regular file, which it returns with its FileInfo.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = checkRegular(st)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// readModuleFile reads a file that names or holds a module, which may be
// hostile: only a regular file (a symbolic link is followed to one), at
// most limit bytes (checked before reading, and while reading, so that a
// file that grows is cut off), and never blocking on a FIFO or a device.
// With quiet > 0 (the modules directory), a file modified less than quiet
// ago, or while it was read, fails with errChanged, to be read again.
// hold, when not nil, is given the file's size before it is opened, and
// the file is read only if hold returns nil; a file that has grown past
// that size since fails with errChanged.
func readModuleFile(path string, limit int64, quiet time.Duration, hold func(int64) error) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(st); err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, tooLarge(st.Size(), limit)
	}
	if hold != nil {
		if err := hold(st.Size()); err != nil {
			return nil, err
		}
		limit = st.Size() // more is a change, caught below
	}
	// A file swapped for a FIFO since the Stat cannot block the open.
	f, before, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !os.SameFile(st, before) {
		return nil, errChanged
	}
	if age := time.Since(before.ModTime()); quiet > 0 && age >= 0 && age < quiet {
		return nil, errChanged
	}
	b, err := readAll(io.LimitReader(f, limit+1), min(before.Size(), limit))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		if hold != nil {
			return nil, errChanged
		}
		return nil, tooLarge(int64(len(b)), limit)
	}
	after, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if quiet > 0 && (after.Size() != int64(len(b)) || !after.ModTime().Equal(before.ModTime())) {
		return nil, errChanged
	}
	return b, nil
}

// checkRegular refuses what is not a regular file.
func checkRegular(st fs.FileInfo) error {
	m := st.Mode()
	var what string
	switch {
	case m.IsRegular():
		return nil
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeDevice != 0:
		what = "a device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m.IsDir():
		what = "a directory"
	default:
		what = "of mode " + m.String()
	}
	return fmt.Errorf("%w: it is %s", ErrNotRegular, what)
}
