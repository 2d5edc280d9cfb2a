package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/abi/abitest"
)

var (
	guestsOnce sync.Once
	guests     map[string][]byte
	guestsErr  error
)

// Guest returns the wasm of an abitest reference guest ("echo", "loop",
// "gopanic", ...); the guests are built once per test process.
func Guest(t testing.TB, name string) []byte {
	t.Helper()
	guestsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		guests, guestsErr = abitest.Build(ctx, filepath.Join(processDir(t), "guests"))
	})
	if guestsErr != nil {
		t.Fatal(guestsErr)
	}
	b, ok := guests[name]
	if !ok {
		t.Fatalf("no abitest guest %q (have %v)", name, abitest.Names())
	}
	return b
}

// CacheDir returns a compilation cache directory shared by every host of the
// test process, so that each module compiles once per test run.
func CacheDir(t testing.TB) string {
	t.Helper()
	d := filepath.Join(processDir(t), "cache")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// processDir is the per-process directory Main removes.
func processDir(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if dir == "" {
		d, err := os.MkdirTemp("", "tinyhost-e2e-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	return dir
}
