package abitest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sourceSection is the custom section `make fixtures` appends to every .wasm
// it builds from a .wat: the hex SHA-256 of that .wat.
const sourceSection = "abitest.wat-sha256"

// TestFixtures checks that every hand-written guest's .wat has its .wasm
// beside it, made from this very source (the digest `make fixtures` records
// in the .wasm), and that the .wasm speaks enough of ABI v1 to be loaded.
// It needs no wat2wasm: after changing a .wat, run `make fixtures`.
func TestFixtures(t *testing.T) {
	wats, err := filepath.Glob(filepath.Join("wat", "*.wat"))
	if err != nil {
		t.Fatal(err)
	}
	if len(wats) == 0 {
		t.Fatal("no wat/*.wat")
	}
	var names []string
	for _, wat := range wats {
		name := strings.TrimSuffix(filepath.Base(wat), ".wat")
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(wat)
			if err != nil {
				t.Fatal(err)
			}
			wasm, err := os.ReadFile(strings.TrimSuffix(wat, ".wat") + ".wasm")
			if err != nil {
				t.Fatalf("%v: run make fixtures", err)
			}
			sum := sha256.Sum256(src)
			got, ok := customSection(t, wasm, sourceSection)
			switch {
			case !ok:
				t.Errorf("%s.wasm has no %s section: run make fixtures", name, sourceSection)
			case string(got) != hex.EncodeToString(sum[:]):
				t.Errorf("%s.wasm was made from another %s.wat: run make fixtures", name, name)
			}
			exports, err := exports(wasm)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"memory", "tinyhost_abi_v1", "tinyhost_describe", "tinyhost_buffer", "tinyhost_handle"} {
				if !slices.Contains(exports, want) {
					t.Errorf("no export %s; exports: %v", want, exports)
				}
			}
		})
	}
	if got := watNames(); !slices.Equal(got, names) {
		t.Errorf("embedded .wasm guests %v, want one per .wat: %v", got, names)
	}
}

// customSection returns the contents of the first custom section named name.
func customSection(t *testing.T, wasm []byte, name string) ([]byte, bool) {
	t.Helper()
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		t.Fatal("not a wasm binary")
	}
	r := wasmReader{b: wasm[8:]}
	for len(r.b) > 0 {
		id := r.byte()
		body := r.next(r.uleb())
		if r.err != nil {
			t.Fatal(r.err)
		}
		if id != 0 {
			continue
		}
		s := wasmReader{b: body}
		if n := string(s.next(s.uleb())); s.err == nil && n == name {
			return s.b, true
		}
	}
	return nil, false
}
