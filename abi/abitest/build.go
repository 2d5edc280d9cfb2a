package abitest

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The guest sources travel inside the package, so that a host outside this
// repository can build them from the module cache.
//
//go:embed guests
var guestFS embed.FS

// The hand-written guests: each wat/<name>.wat beside the <name>.wasm that
// `make fixtures` made from it, so that using the kit needs no wat2wasm.
//
//go:embed wat
var watFS embed.FS

// goMod is the go.mod of the throwaway module the guests are built in. Its
// path is the import path of guests/ inside the abi module, so that the
// guests import guests/internal/guest by the same path in both places.
const goMod = "module github.com/tinyhost/tinyhost/abi/abitest/guests\n\ngo 1.26\n"

// shared is the directory under guests/ of the plumbing the guests share
// (package guest); it is not a guest.
const shared = "internal"

// Names returns the names of the reference guests, sorted: the Go guests,
// each a directory guests/<name> holding a package main, and the
// hand-written ones, each a wat/<name>.wasm built from wat/<name>.wat.
func Names() []string {
	names := append(goNames(), watNames()...)
	slices.Sort(names)
	return names
}

// goNames returns the names of the Go guests, sorted.
func goNames() []string {
	entries, err := guestFS.ReadDir("guests")
	if err != nil {
		panic(err) // the embedded tree is fixed at compile time
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != shared {
			names = append(names, e.Name())
		}
	}
	return names
}

// watNames returns the names of the hand-written guests, sorted.
func watNames() []string {
	entries, err := watFS.ReadDir("wat")
	if err != nil {
		panic(err) // the embedded tree is fixed at compile time
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".wasm"); ok {
			names = append(names, name)
		}
	}
	return names
}

// watGuest returns the embedded wasm of a hand-written guest.
func watGuest(name string) ([]byte, bool) {
	b, err := watFS.ReadFile("wat/" + name + ".wasm")
	return b, err == nil
}

// Build builds every Go reference guest with the go command on PATH
// (GOOS=wasip1 GOARCH=wasm, c-shared, so each is a reactor exporting
// _initialize) and returns the wasm of each guest by name, the hand-written
// ones included. It writes the sources to dir/src and the modules to
// dir/wasm/<name>.wasm; an empty dir means a temporary directory, removed
// before Build returns. The caller's GOCACHE applies, so a second Build costs
// little more than linking.
func Build(ctx context.Context, dir string) (map[string][]byte, error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "abitest-")
		if err != nil {
			return nil, fmt.Errorf("abitest: build guests: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	src, out := filepath.Join(dir, "src"), filepath.Join(dir, "wasm")
	if err := writeSources(src); err != nil {
		return nil, fmt.Errorf("abitest: build guests: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("abitest: build guests: %w", err)
	}
	// `go build -buildmode=c-shared` takes exactly one main package, so the
	// guests are built as executables in one invocation, which compiles and
	// links them in parallel, and the linker is told to make reactors: its
	// -buildmode flag comes after the one the go command passes. Should a
	// toolchain stop honouring that, every guest is built on its own.
	if err := goBuild(ctx, src, "-ldflags=-buildmode=c-shared", "-o", out+string(filepath.Separator), "./..."); err != nil {
		return nil, err
	}
	guests, err := readGuests(out, "")
	if err != nil {
		guests, err = buildEach(ctx, src, out)
	}
	if err != nil {
		return nil, err
	}
	for _, name := range watNames() {
		b, _ := watGuest(name)
		if err := os.WriteFile(filepath.Join(out, name+".wasm"), b, 0o644); err != nil {
			return nil, fmt.Errorf("abitest: build guests: %w", err)
		}
		guests[name] = b
	}
	return guests, nil
}

// buildEach builds the guests one go invocation each, with
// -buildmode=c-shared.
func buildEach(ctx context.Context, src, out string) (map[string][]byte, error) {
	for _, name := range goNames() {
		if err := goBuild(ctx, src, "-buildmode=c-shared", "-o", filepath.Join(out, name+".wasm"), "./"+name); err != nil {
			return nil, err
		}
	}
	return readGuests(out, ".wasm")
}

// readGuests reads out/<name><ext> of every Go guest, checks that it is a
// reactor, and renames it to <name>.wasm.
func readGuests(out, ext string) (map[string][]byte, error) {
	guests := map[string][]byte{}
	for _, name := range goNames() {
		file := filepath.Join(out, name+ext)
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("abitest: build guests: %w", err)
		}
		names, err := exports(b)
		if err != nil {
			return nil, fmt.Errorf("abitest: guest %s: %w", name, err)
		}
		if !slices.Contains(names, "_initialize") {
			return nil, fmt.Errorf("abitest: guest %s is not a reactor: no _initialize export", name)
		}
		if ext != ".wasm" {
			if err := os.Rename(file, file+".wasm"); err != nil {
				return nil, fmt.Errorf("abitest: build guests: %w", err)
			}
		}
		guests[name] = b
	}
	return guests, nil
}

func writeSources(src string) error {
	if err := os.RemoveAll(src); err != nil {
		return err
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(goMod), 0o644); err != nil {
		return err
	}
	return fs.WalkDir(guestFS, "guests", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "guests" {
			return err
		}
		rel, _ := filepath.Rel("guests", filepath.FromSlash(p))
		if d.IsDir() {
			return os.Mkdir(filepath.Join(src, rel), 0o755)
		}
		b, err := guestFS.ReadFile(path.Clean(p))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(src, rel), b, 0o644)
	})
}

func goBuild(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-trimpath"}, args...)...)
	cmd.Dir = dir
	// The caller's GOFLAGS (say -race or -cover) do not apply to wasm, and
	// no go.work of theirs may pull the throwaway module in.
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return fmt.Errorf("abitest: %s: %w\n%s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

var built struct {
	once   sync.Once
	guests map[string][]byte
	err    error
}

// Guest returns the wasm of the named reference guest. The first call in a
// test process that asks for a Go guest builds every guest (see Build); the
// others share the result.
func Guest(t testing.TB, name string) []byte {
	t.Helper()
	if b, ok := watGuest(name); ok {
		return b
	}
	built.once.Do(func() {
		built.guests, built.err = Build(context.Background(), "")
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	b, ok := built.guests[name]
	if !ok {
		t.Fatalf("abitest: no guest %q; the guests are %v", name, Names())
	}
	return b
}

// exports returns the export names of a wasm binary, in order. It reads the
// export section and skips every other section.
func exports(wasm []byte) ([]string, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, errors.New("not a wasm binary")
	}
	r := wasmReader{b: wasm[8:]}
	for len(r.b) > 0 {
		id := r.byte()
		body := r.next(r.uleb())
		if r.err != nil || id != 7 { // 7: the export section
			continue
		}
		s := wasmReader{b: body}
		var names []string
		for n := s.uleb(); n > 0 && s.err == nil; n-- {
			names = append(names, string(s.next(s.uleb())))
			s.byte() // kind
			s.uleb() // index
		}
		return names, s.err
	}
	return nil, r.err
}

type wasmReader struct {
	b   []byte
	err error
}

func (r *wasmReader) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *wasmReader) uleb() uint64 {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	r.fail()
	return 0
}

func (r *wasmReader) next(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *wasmReader) fail() {
	if r.err == nil {
		r.err = errors.New("truncated wasm binary")
	}
	r.b = nil
}
