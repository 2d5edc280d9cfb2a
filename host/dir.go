package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/host/internal/watch"
)

// dirQuiet is how long a file in the modules directory must be left alone
// before it is loaded: a file being copied in arrives in several writes.
var dirQuiet = 150 * time.Millisecond

// dirLoader keeps the modules of Options.ModulesDir in step with its
// *.wasm and *.ref files.
type dirLoader struct {
	h     *Host
	dir   string
	w     *watch.Watcher
	files map[string]dirFile // by path; touched by the loader's goroutine only
	done  chan struct{}
}

type dirFile struct {
	module string
	digest string
	source string // the module's Source: the file, or what a ref file names
}

func isModuleFile(name string) bool {
	return (strings.HasSuffix(name, ".wasm") || strings.HasSuffix(name, artifact.RefFileExt)) &&
		!strings.HasPrefix(name, ".")
}

// startDir watches dir, loads the files it holds, then follows changes.
func startDir(h *Host, dir string) (*dirLoader, error) {
	// Watch first, so that nothing changed during the scan is missed.
	w, err := watch.New(dir, dirQuiet, isModuleFile)
	if err != nil {
		return nil, err
	}
	d := &dirLoader{h: h, dir: dir, w: w, files: map[string]dirFile{}, done: make(chan struct{})}
	entries, err := os.ReadDir(dir)
	if err != nil {
		w.Close()
		return nil, err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && isModuleFile(e.Name()) {
			d.sync(filepath.Join(dir, e.Name()))
		}
	}
	go d.run()
	return d, nil
}

func (d *dirLoader) run() {
	defer close(d.done)
	for {
		select {
		case c, ok := <-d.w.Changes():
			if !ok {
				return
			}
			d.sync(c.Path)
		case err := <-d.w.Errors():
			d.h.log.Warn("modules directory", "dir", d.dir, "error", err)
		}
	}
}

func (d *dirLoader) close() {
	_ = d.w.Close()
	<-d.done
}

// sync brings the module of one file in step with the file: load it when it
// is new or changed, unload its module when it is gone.
func (d *dirLoader) sync(path string) {
	h := d.h
	prev, known := d.files[path]
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if known {
			delete(d.files, path)
			if err := h.unload(prev.module, prev.source); err == nil {
				h.log.Info("module file removed", "file", path, "module", prev.module)
			}
		}
		return
	}
	if err != nil {
		h.log.Error("cannot read module file", "file", path, "error", err)
		return
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	if known && prev.digest == digest {
		return
	}
	source := path
	if strings.HasSuffix(path, artifact.RefFileExt) {
		// A reference file names the module; its bytes come from the
		// registry or the cache.
		if b, source, err = d.fetch(path, b); err != nil {
			if known {
				h.log.Error("module reference not loaded; the previous version keeps serving", "file", path, "error", err)
			} else {
				h.log.Error("module reference not loaded", "file", path, "error", err)
			}
			return
		}
	}
	info, err := h.load(h.ctx, b, source, LoadOptions{})
	if err != nil {
		if known {
			h.log.Error("module file not loaded; the previous version keeps serving", "file", path, "error", err)
		} else {
			h.log.Error("module file not loaded", "file", path, "error", err)
		}
		return
	}
	d.files[path] = dirFile{module: info.Name, digest: digest, source: source}
	if known && prev.module != info.Name {
		// The file now holds another module: the old one goes.
		_ = h.unload(prev.module, prev.source)
	}
}

// fetch reads the reference file b at path and fetches the wasm it names.
// A failure is reported as an EventFailed, as a bad .wasm is.
func (d *dirLoader) fetch(path string, b []byte) ([]byte, string, error) {
	h := d.h
	src, err := artifact.ParseRefFile(b)
	if err == nil {
		var wasm []byte
		if wasm, err = h.fetch(h.ctx, src); err == nil {
			return wasm, src.String(), nil
		}
	}
	lerr := &LoadError{File: path, Err: err}
	h.events.publish(Event{Type: EventFailed, Source: path, Err: lerr})
	return nil, "", lerr
}
