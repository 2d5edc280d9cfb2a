package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

func TestGreeter(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    string
		err     string
	}{
		{"name", `{"name":"Ada"}`, `{"greeting":"Hello, Ada!"}`, ""},
		{"spaces trimmed", `{"name":"  Grace "}`, `{"greeting":"Hello, Grace!"}`, ""},
		{"unicode", `{"name":"Émilie"}`, `{"greeting":"Hello, Émilie!"}`, ""},
		{"empty name", `{"name":""}`, "", `"name" is missing or empty`},
		{"missing name", `{}`, "", `"name" is missing or empty`},
		{"empty payload", ``, "", `"name" is missing or empty`},
		{"not JSON", `Ada`, "", "payload is not the expected JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.New("greeter")
			got, err := h.Handle("in", []byte(tc.payload))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("reply %s, want %s", got, tc.want)
			}
		})
	}
}

func TestGreeterUnknownPort(t *testing.T) {
	_, err := sdktest.New("greeter").Handle("out", nil)
	if !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("err %v, want not found", err)
	}
}

// TestBuildsForWasm builds the module as the README says and checks that the
// result is a tinyhost ABI v1 module.
func TestBuildsForWasm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds with the Go toolchain")
	}
	out := filepath.Join(t.TempDir(), "hello.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bin, []byte("\x00asm")) {
		t.Fatal("not a wasm binary")
	}
	for _, name := range []string{"tinyhost_abi_v1", "tinyhost_describe", "tinyhost_buffer", "tinyhost_handle"} {
		if !bytes.Contains(bin, []byte(name)) {
			t.Errorf("no export %s", name)
		}
	}
}
