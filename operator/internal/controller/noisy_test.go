package controller

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestLongLoadError: a module whose load the host refuses with a message
// of megabytes (a guest whose descriptor names 100 components with names
// of 9,000 bytes, each quoted twice in the host's answer) is Failed,
// saying why in a few KiB, and the host's status, which every tenant's
// placement there is read from, is still written: another tenant's
// module placed on the host then becomes Ready.
func TestLongLoadError(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	namespace(t, b.c, "team-a")
	namespace(t, b.c, "team-b")
	// Pushed as is: the registry's own check would load it, and refuse it.
	ac, err := artifact.New(b.reg.ClientOptions())
	require.NoError(t, err)
	noisy := b.reg.Host + "/tinyhost/noisy:0.1.0"
	_, err = ac.Push(t.Context(), noisy, bigDescriptorModule(100, 9000),
		abi.Descriptor{ABI: abi.Version, Name: "noisy", Version: "0.1.0", Components: []abi.Component{{Name: "c"}}}, artifact.PushOptions{})
	require.NoError(t, err)

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "noisy"}, Spec: v1alpha1.TinyModuleSpec{Image: noisy}})
	var msg string
	eventually(t, 2*time.Minute, "team-b/noisy Failed on host-a", func() error {
		m := b.module(t, "team-b", "noisy")
		for _, p := range m.Status.Placements {
			if p.Host == "host-a" && p.Phase == v1alpha1.PhaseFailed {
				msg = p.Message
				return nil
			}
		}
		return fmt.Errorf("%s", brief(m))
	})
	t.Logf("team-b/noisy's placement message: %d bytes", len(msg))
	assert.Contains(t, msg, "invalid descriptor")
	assert.LessOrEqual(t, len(msg), maxHostMessage)

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "common"}, Spec: v1alpha1.TinyModuleSpec{Image: b.comm.Ref}})
	m := b.ready(t, "team-a", "common", 2*time.Minute)
	assert.Equal(t, []string{"host-a"}, readyOn(m))
	for _, e := range b.host(t, "host-a").Status.Modules {
		require.LessOrEqual(t, len(e.Message), maxHostMessage, "entry %s", e.Name)
	}
}

// bigDescriptorModule is an ABI v1 guest, encoded here, whose descriptor
// has n components named by size bytes of 'A', which no name may be.
func bigDescriptorModule(n, size int) []byte {
	comps := make([]string, n)
	for i := range comps {
		comps[i] = fmt.Sprintf(`{"name":"%s%d","ports":[]}`, strings.Repeat("A", size), i)
	}
	desc := `{"abi":1,"name":"noisy","version":"0.1.0","components":[` + strings.Join(comps, ",") + `]}`
	const at = 1024
	uleb := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	sleb := func(v int64) []byte {
		var out []byte
		for {
			b := byte(v & 0x7f)
			v >>= 7
			if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
				return append(out, b)
			}
			out = append(out, b|0x80)
		}
	}
	vec := func(items ...[]byte) []byte {
		out := uleb(uint64(len(items)))
		for _, it := range items {
			out = append(out, it...)
		}
		return out
	}
	name := func(s string) []byte { return append(uleb(uint64(len(s))), s...) }
	section := func(id byte, body []byte) []byte {
		return append(append([]byte{id}, uleb(uint64(len(body)))...), body...)
	}
	body := func(code ...byte) []byte {
		return append(uleb(uint64(len(code)+2)), append(append([]byte{0}, code...), 0x0b)...)
	}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	const i32, i64 = 0x7f, 0x7e
	wasm := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	wasm = append(wasm, section(1, vec( // types
		[]byte{0x60, 0, 0},           // () -> ()
		[]byte{0x60, 0, 1, i64},      // () -> i64
		[]byte{0x60, 1, i32, 1, i32}, // (i32) -> i32
		[]byte{0x60, 1, i32, 1, i64}, // (i32) -> i64
	))...)
	wasm = append(wasm, section(3, vec([]byte{0}, []byte{1}, []byte{2}, []byte{3}))...)
	pages := uint64((at+len(desc))>>16 + 1)
	wasm = append(wasm, section(5, vec(cat([]byte{0}, uleb(pages))))...)
	wasm = append(wasm, section(7, vec(
		cat(name("memory"), []byte{2, 0}),
		cat(name("tinyhost_abi_v1"), []byte{0, 0}),
		cat(name("tinyhost_describe"), []byte{0, 1}),
		cat(name("tinyhost_buffer"), []byte{0, 2}),
		cat(name("tinyhost_handle"), []byte{0, 3}),
	))...)
	wasm = append(wasm, section(10, vec(
		body(),
		body(cat([]byte{0x42}, sleb(int64(at)<<32|int64(len(desc))))...),
		body(0x41, 0),
		body(0x42, 0),
	))...)
	wasm = append(wasm, section(11, vec(cat([]byte{0, 0x41}, sleb(at), []byte{0x0b}, name(desc))))...)
	return wasm
}
