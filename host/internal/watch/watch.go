// Package watch reports files of one directory that were added, replaced or
// removed, once each file has been quiet for a while.
//
// A file copied into the directory arrives as a create followed by several
// writes; a file moved into place arrives as one create (rename); an editor
// may remove and re-create it. Reacting to the first event would read a
// half-written file, so every event only (re)starts that file's quiet timer,
// and the file is reported when the timer fires: as removed if it is gone by
// then, as changed otherwise.
//
// The timer runs only as long as the file's content is younger than quiet:
// a file moved into place whole (the atomic way to drop one) keeps the
// modification time of when it was written, and is reported at once, so
// that a dropped module answers without a wait; a file being written has
// just been modified, and waits the rest of quiet after its last write.
package watch

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Change is one settled change to a file.
type Change struct {
	// Path is the file's path: the watched directory joined with its name.
	Path string
	// Removed is true when the file no longer exists.
	Removed bool
}

// Watcher watches one directory. Create it with New; read Changes until it
// is closed.
type Watcher struct {
	fs      *fsnotify.Watcher
	quiet   time.Duration
	match   func(name string) bool
	changes chan Change
	errs    chan error
	fired   chan fired
	done    chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	timers map[string]*timer
	gen    uint64
}

type timer struct {
	t   *time.Timer
	gen uint64
}

type fired struct {
	path string
	gen  uint64
}

// New watches dir. Only files whose base name satisfies match are reported;
// a file is reported once no event touched it for quiet.
func New(dir string, quiet time.Duration, match func(name string) bool) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := fw.Add(dir); err != nil {
		fw.Close()
		return nil, err
	}
	w := &Watcher{
		fs:      fw,
		quiet:   quiet,
		match:   match,
		changes: make(chan Change, 16),
		errs:    make(chan error, 1),
		fired:   make(chan fired, 16),
		done:    make(chan struct{}),
		timers:  map[string]*timer{},
	}
	w.wg.Add(1)
	go w.run()
	return w, nil
}

// Changes delivers settled changes. It is closed by Close.
func (w *Watcher) Changes() <-chan Change { return w.changes }

// Errors delivers errors of the underlying watcher (e.g. an event queue
// overflow). Sends are dropped when nobody reads.
func (w *Watcher) Errors() <-chan error { return w.errs }

// Close stops watching and waits for the watcher's goroutine to end.
func (w *Watcher) Close() error {
	select {
	case <-w.done:
		return nil
	default:
	}
	close(w.done)
	err := w.fs.Close()
	w.wg.Wait()
	w.mu.Lock()
	for p, t := range w.timers {
		t.t.Stop()
		delete(w.timers, p)
	}
	w.mu.Unlock()
	return err
}

func (w *Watcher) run() {
	defer w.wg.Done()
	defer close(w.changes)
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			if !w.match(filepath.Base(ev.Name)) {
				continue
			}
			if ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Remove|fsnotify.Rename|fsnotify.Chmod) != 0 {
				w.touch(ev.Name)
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			select {
			case w.errs <- err:
			default:
			}
		case f := <-w.fired:
			w.mu.Lock()
			if t := w.timers[f.path]; t != nil && t.gen == f.gen {
				delete(w.timers, f.path)
			}
			w.mu.Unlock()
			c := Change{Path: f.path}
			if _, err := os.Stat(f.path); errors.Is(err, os.ErrNotExist) {
				c.Removed = true
			}
			select {
			case w.changes <- c:
			case <-w.done:
				return
			}
		}
	}
}

// touch (re)starts the quiet timer of path, for what is left of quiet
// since the file's last modification.
func (w *Watcher) touch(path string) {
	wait := w.wait(path)
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.timers[path]; ok && t.t.Stop() {
		t.t.Reset(wait)
		return
	}
	// No timer, or it fired already: the file changed again after it
	// settled, so it gets a timer of its own.
	w.gen++
	f := fired{path: path, gen: w.gen}
	w.timers[path] = &timer{gen: f.gen, t: time.AfterFunc(wait, func() {
		select {
		case w.fired <- f:
		case <-w.done:
		}
	})}
}

// wait is how long path must yet be left alone: quiet less the age of its
// content, or quiet when it is gone (an editor that removes a file and
// writes it anew must not unload its module in between).
func (w *Watcher) wait(path string) time.Duration {
	st, err := os.Stat(path)
	if err != nil {
		return w.quiet
	}
	switch age := time.Since(st.ModTime()); {
	case age < 0: // modified in the future: a clock was set back
		return w.quiet
	case age >= w.quiet:
		return 0
	default:
		return w.quiet - age
	}
}
