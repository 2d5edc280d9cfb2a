package abitest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBuild builds every guest and checks that each exports what its
// scenario needs. The suite itself runs from a host's tests.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	guests, err := Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	checkGuests(t, guests, Names())
	for _, name := range Names() {
		if _, err := os.Stat(filepath.Join(dir, "wasm", name+".wasm")); err != nil {
			t.Errorf("Build left no file for %s: %v", name, err)
		}
	}
}

// TestBuildEach checks the fallback of Build: one go invocation per guest
// with -buildmode=c-shared.
func TestBuildEach(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every guest a second time")
	}
	dir := t.TempDir()
	src, out := filepath.Join(dir, "src"), filepath.Join(dir, "wasm")
	if err := writeSources(src); err != nil {
		t.Fatal(err)
	}
	guests, err := buildEach(t.Context(), src, out)
	if err != nil {
		t.Fatal(err)
	}
	checkGuests(t, guests, goNames())
}

// checkGuests checks that guests are the guests named want, and that each
// Go guest exports what the ABI asks.
func checkGuests(t *testing.T, guests map[string][]byte, want []string) {
	t.Helper()
	if len(guests) != len(want) {
		t.Errorf("built %d guests, want %d (%v)", len(guests), len(want), want)
	}
	base := []string{"memory", "_initialize", "tinyhost_describe", "tinyhost_buffer", "tinyhost_handle"}
	for _, name := range goNames() {
		t.Run(name, func(t *testing.T) {
			names, err := exports(guests[name])
			if err != nil {
				t.Fatal(err)
			}
			want := append(slices.Clone(base), "tinyhost_abi_v1")
			switch name {
			case "abiv2":
				want = append(slices.Clone(base), "tinyhost_abi_v2")
			case "noversion":
				want = base
			}
			var versions []string
			for _, n := range names {
				if strings.HasPrefix(n, "tinyhost_abi_v") {
					versions = append(versions, n)
				}
			}
			for _, w := range want {
				if !slices.Contains(names, w) {
					t.Errorf("no export %s; exports: %v", w, names)
				}
			}
			if len(versions) > 1 || name == "noversion" && len(versions) > 0 {
				t.Errorf("version exports %v", versions)
			}
			if slices.Contains(names, "_start") {
				t.Errorf("exports _start: built as a command, not a reactor")
			}
		})
	}
}

func TestGuest(t *testing.T) {
	a, b := Guest(t, "echo"), Guest(t, "echo")
	if len(a) == 0 || &a[0] != &b[0] {
		t.Error("Guest built echo twice")
	}
	if w, _ := watGuest("recurse"); !bytes.Equal(Guest(t, "recurse"), w) || len(w) == 0 {
		t.Error("Guest does not return the embedded recurse.wasm")
	}
}

func TestExports(t *testing.T) {
	// A module exporting function 0 as "f" and memory 0 as "memory".
	wasm := []byte("\x00asm\x01\x00\x00\x00" +
		"\x07\x0e\x02" + "\x01f\x00\x00" + "\x06memory\x02\x00")
	got, err := exports(wasm)
	if err != nil || !slices.Equal(got, []string{"f", "memory"}) {
		t.Errorf("exports = %v, %v", got, err)
	}
	for _, bad := range []string{"", "\x00asm", "\x00asm\x01\x00\x00\x00\x07\x10\x02", "\x00asm\x01\x00\x00\x00\x07\x03\x02\x09f", "not wasm at all"} {
		if _, err := exports([]byte(bad)); err == nil {
			t.Errorf("exports(%q) succeeded", bad)
		}
	}
}
