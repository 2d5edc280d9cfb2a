package host_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// The fuzz targets feed one host, under small limits, module after module:
// FuzzHostLoad whole modules (mutations of hand-written guests in
// testdata/wat and of the conformance kit's Go echo guest), FuzzHostCode
// valid modules whose code is random. Each input is loaded, invoked when it
// loads, and unloaded; then the echo module, loaded first, must answer
// within a second. The seed corpus is in testdata/fuzz/<target>; a bounded
// run is
//
//	go test -run '^$' -fuzz FuzzHostLoad -fuzztime 30s ./host/
//
// A load has fuzzLoadTimeout, a call fuzzCallTimeout, and a hang guard kills
// the process (SIGQUIT, with every goroutine's stack) when an input runs
// past fuzzHangLimit, so that the fuzzer records a hang as a crash instead
// of waiting for it forever.
const (
	fuzzLoadTimeout = 20 * time.Second
	fuzzCallTimeout = 2 * time.Second
	fuzzHangLimit   = 60 * time.Second
)

// fuzzLimits are the limits of a fuzzed module: a Go guest still fits in
// its memory.
var fuzzLimits = api.Limits{
	MemoryPages:  128,
	CallTimeout:  50 * time.Millisecond,
	MinInstances: new(1),
	MaxInstances: 1,
	QueueTimeout: 100 * time.Millisecond,
}

func FuzzHostLoad(f *testing.F) {
	// The Go guest is too large to commit as a corpus file; bigmemory is
	// the conformance kit's.
	f.Add(abitest.Guest(f, "echo"))
	f.Add(abitest.Guest(f, "bigmemory"))
	fz := newFuzzHost(f)
	f.Fuzz(func(t *testing.T, wasm []byte) { fz.run(t, wasm) })
}

func FuzzHostCode(f *testing.F) {
	fz := newFuzzHost(f)
	f.Fuzz(func(t *testing.T, mode byte, body []byte) { fz.run(t, codeFrame(mode, body)) })
}

// fuzzHost is the host of a fuzz target, with its echo module.
type fuzzHost struct {
	h     *host.Host
	guard *hangGuard
}

func newFuzzHost(f *testing.F) *fuzzHost {
	ctx := f.Context()
	// No compilation cache on disk: it would keep every input's code.
	h, err := host.New(ctx, host.Options{Logger: hclog.NewNullLogger()})
	require.NoError(f, err)
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		require.NoError(f, h.Close(ctx))
	})
	lctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	_, err = h.Load(lctx, abitest.Guest(f, "echo"), host.LoadOptions{})
	require.NoError(f, err)
	return &fuzzHost{h: h, guard: startHangGuard(f, fuzzHangLimit)}
}

// run loads wasm as module "fuzzed", invokes its input ports when it loads,
// unloads it, and checks that the host still serves the echo module.
func (fz *fuzzHost) run(t *testing.T, wasm []byte) {
	fz.guard.arm()
	defer fz.guard.disarm()
	const name = "fuzzed"
	ctx, cancel := context.WithTimeout(t.Context(), fuzzLoadTimeout)
	defer cancel()
	info, err := fz.h.Load(ctx, wasm, host.LoadOptions{Name: name, Limits: fuzzLimits})
	if err != nil {
		t.Logf("load: %v", err)
		var le *api.LoadError
		require.ErrorAs(t, err, &le, "a failed load is a *LoadError: %v", err)
		require.Equal(t, name, le.Module, "the error names the module: %v", err)
	} else {
		calls := 0
		for _, c := range info.Descriptor.Components {
			for _, p := range c.Ports {
				if p.Direction != "input" || calls == 4 {
					continue
				}
				calls++
				cctx, cancel := context.WithTimeout(t.Context(), fuzzCallTimeout)
				_, err := fz.h.Invoke(cctx, api.Request{Module: name, Component: c.Name, Port: p.Name, Payload: []byte(`{"fuzz":1}`)})
				cancel()
				t.Logf("invoke %s/%s: %v", c.Name, p.Name, err)
				if err != nil {
					var ce *api.CallError
					require.ErrorAs(t, err, &ce, "a failed call is a *CallError: %v", err)
					require.Equal(t, name, ce.Module, "the error names the module: %v", err)
				}
			}
		}
		require.NoError(t, fz.h.Unload(ctx, name))
	}
	require.Len(t, fz.h.Modules(), 1, "only the echo module is left")

	ectx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	resp, err := fz.h.Invoke(ectx, api.Request{Module: "echo", Component: "echo", Port: "in", Payload: []byte("still here")})
	require.NoError(t, err, "the echo module does not answer within a second after this input")
	require.Equal(t, "still here", string(resp.Payload))
}

// hangGuard is a child process that kills this one with SIGQUIT when an
// input runs longer than its limit. It has to be outside: a guest that
// never leaves compiled code stops the whole Go runtime at the next garbage
// collection, in-process timers included.
type hangGuard struct {
	mu sync.Mutex
	w  io.WriteCloser
}

const hangGuardScript = `armed=0
while :; do
  if [ "$armed" = 1 ]; then read -r -t "$1" line; rc=$?; else read -r line; rc=$?; fi
  if [ "$rc" -gt 128 ]; then
    echo "hang guard: an input ran over $1 s: SIGQUIT to $2" >&2
    kill -QUIT "$2"; sleep 10; kill -KILL "$2" 2>/dev/null; exit 0
  fi
  [ "$rc" -ne 0 ] && exit 0
  case "$line" in a) armed=1 ;; d) armed=0 ;; esac
done`

func startHangGuard(tb testing.TB, limit time.Duration) *hangGuard {
	bash, err := exec.LookPath("bash")
	require.NoError(tb, err, "the hang guard runs in bash")
	cmd := exec.Command(bash, "-c", hangGuardScript, "hangguard", strconv.Itoa(int(limit/time.Second)), strconv.Itoa(os.Getpid()))
	w, err := cmd.StdinPipe()
	require.NoError(tb, err)
	cmd.Stderr = os.Stderr
	require.NoError(tb, cmd.Start())
	tb.Cleanup(func() {
		w.Close() // the guard exits at the end of its input
		_ = cmd.Wait()
	})
	return &hangGuard{w: w}
}

func (g *hangGuard) arm()    { g.send("a\n") }
func (g *hangGuard) disarm() { g.send("d\n") }

func (g *hangGuard) send(s string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := io.WriteString(g.w, s); err != nil {
		panic("hang guard: " + err.Error())
	}
}

// codeFrame is a valid ABI v1 module around one function of random code,
// body (its instructions, ending with end), of type () -> () with locals
// i32, i32, i64. mode says who calls it: bit 0 _initialize, bit 1 the start
// section, bit 2 tinyhost_handle, bit 3 tinyhost_describe. The module
// imports every host function, has a funcref table holding the function
// and a helper (i32) -> i32, one page of memory (at most 4), and a mutable
// i32 global, so that random code has something to call, index and store.
func codeFrame(mode byte, body []byte) []byte {
	const (
		fnFuzzed = 12 // after 7 imports and abi_v1, describe, buffer, handle, _initialize
		fnStart  = 14
	)
	i32, i64 := byte(0x7F), byte(0x7E)
	call := func(on bool) []byte {
		if on {
			return []byte{0x10, fnFuzzed}
		}
		return nil
	}
	types := vec(
		[]byte{0x60, 0, 0},                          // 0: () -> ()
		[]byte{0x60, 0, 1, i64},                     // 1: () -> i64
		[]byte{0x60, 1, i32, 1, i32},                // 2: (i32) -> i32
		[]byte{0x60, 1, i32, 1, i64},                // 3: (i32) -> i64
		[]byte{0x60, 4, i32, i32, i32, i32, 1, i64}, // 4: host calls
		[]byte{0x60, 3, i32, i32, i32, 0},           // 5: log
	)
	var imports [][]byte
	for _, name := range []string{"log", "emit", "send", "call", "config", "timer", "result"} {
		typ := byte(4)
		if name == "log" {
			typ = 5
		}
		imports = append(imports, cat(str("tinyhost_v1"), str(name), []byte{0x00, typ}))
	}
	exports := vec(
		cat(str("tinyhost_abi_v1"), []byte{0x00, 7}),
		cat(str("tinyhost_describe"), []byte{0x00, 8}),
		cat(str("tinyhost_buffer"), []byte{0x00, 9}),
		cat(str("tinyhost_handle"), []byte{0x00, 10}),
		cat(str("_initialize"), []byte{0x00, 11}),
		cat(str("memory"), []byte{0x02, 0}),
	)
	const descAt, okAt = 1024, 2048
	packed := func(ptr, n uint64) []byte { return cat([]byte{0x42}, sleb(int64(ptr<<32|n))) }
	code := vec(
		fnBody(nil, 0x0B), // abi_v1
		fnBody(nil, cat(call(mode&8 != 0), packed(descAt, uint64(len(fuzzDescriptor))), []byte{0x0B})...), // describe
		fnBody(nil, cat([]byte{0x41}, sleb(8192), []byte{0x0B})...),                                       // buffer: i32.const 8192
		fnBody(nil, cat(call(mode&4 != 0), packed(okAt, 1), []byte{0x0B})...),                             // handle: empty ok
		fnBody(nil, cat(call(mode&1 != 0), []byte{0x0B})...),                                              // _initialize
		fnBody(vec([]byte{0x02, i32}, []byte{0x01, i64}), body...),                                        // fuzzed
		fnBody(nil, 0x20, 0x00, 0x0B),                                                                     // helper: local.get 0
		fnBody(nil, cat(call(mode&2 != 0), []byte{0x0B})...),                                              // start
	)
	sections := [][]byte{
		section(1, types),
		section(2, vec(imports...)),
		section(3, vec([]byte{0}, []byte{1}, []byte{2}, []byte{3}, []byte{0}, []byte{0}, []byte{2}, []byte{0})),
		section(4, vec([]byte{0x70, 0x01, 2, 8})),            // funcref table, 2 to 8
		section(5, vec([]byte{0x01, 1, 4})),                  // memory, 1 to 4 pages
		section(6, vec([]byte{i32, 0x01, 0x41, 0x00, 0x0B})), // mut i32 = 0
		section(7, exports),
	}
	if mode&2 != 0 {
		sections = append(sections, section(8, []byte{fnStart}))
	}
	sections = append(sections,
		section(9, vec(cat([]byte{0x00, 0x41, 0x00, 0x0B}, vec([]byte{fnFuzzed}, []byte{fnFuzzed + 1})))),
		section(10, code),
		section(11, vec(
			cat([]byte{0x00, 0x41}, sleb(descAt), []byte{0x0B}, str(fuzzDescriptor)),
			cat([]byte{0x00, 0x41}, sleb(okAt), []byte{0x0B}, str("\x00")),
		)),
	)
	return cat(append([][]byte{{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}}, sections...)...)
}

const fuzzDescriptor = `{"abi":1,"name":"wat","version":"1.0.0","components":[{"name":"c","ports":[{"name":"in","direction":"input"},{"name":"out","direction":"output"}]}]}`

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func uleb(n uint64) []byte { return binary.AppendUvarint(nil, n) }

func sleb(n int64) []byte {
	var b []byte
	for {
		c := byte(n & 0x7F)
		n >>= 7
		if n == 0 && c&0x40 == 0 || n == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func str(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func vec(items ...[]byte) []byte { return cat(append([][]byte{uleb(uint64(len(items)))}, items...)...) }

func section(id byte, content []byte) []byte {
	return cat([]byte{id}, uleb(uint64(len(content))), content)
}

// fnBody is a code entry: its locals (a vec of count, type; nil for none)
// and instructions.
func fnBody(locals []byte, instrs ...byte) []byte {
	if locals == nil {
		locals = []byte{0}
	}
	b := cat(locals, instrs)
	return cat(uleb(uint64(len(b))), b)
}
