package instrument

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// FuzzRewrite checks that Rewrite never panics, that what it returns
// decodes again to the same loops, imports and exports, that with the
// host's options the injected state is unreachable (checkInjected), and
// that whenever wazero compiles the input it also compiles the output,
// with and without WithPoll and the host's options. The seed corpus is in
// testdata/fuzz/FuzzRewrite.
func FuzzRewrite(f *testing.F) {
	ctx := f.Context()
	rt := wazero.NewRuntime(ctx)
	f.Cleanup(func() { rt.Close(context.WithoutCancel(ctx)) })

	f.Fuzz(func(t *testing.T, in []byte) {
		res, err := Rewrite(in, testGlobal)
		if err != nil {
			// wazero is not run on refused input: its decoder allocates
			// in proportion to declared counts before checking them, so
			// a few malformed bytes can make it allocate gigabytes.
			require.True(t, strings.HasPrefix(err.Error(), "instrument: "), err.Error())
			require.Nil(t, res)
			return
		}

		// The output decodes again: same loops, same imports, and the
		// new export last.
		const other = "\x00other"
		again, err := Rewrite(res.Wasm, other)
		if err == nil {
			assert.Equal(t, res.Loops, again.Loops)
			assert.Equal(t, res.Global+1, again.Global)
			assert.Equal(t, res.Imports, again.Imports)
			assert.Equal(t, append(res.Exports, Export{Name: testGlobal, Kind: KindGlobal, Index: res.Global}), again.Exports)
		} else {
			require.Contains(t, err.Error(), "already exports", "the output must decode again")
		}
		_, err = Rewrite(res.Wasm, testGlobal)
		require.Error(t, err, "the output exports the global, so a second rewrite must be refused")

		// WithPoll decodes the same way.
		polled, err := Rewrite(in, testGlobal, WithPoll(1000))
		require.NoError(t, err)
		assert.Equal(t, res.Loops, polled.Loops)
		// With the host's options too (which may refuse more: a name
		// taken, tables too large), and then the injected state is
		// unreachable.
		hosted, err := Rewrite(in, testGlobal, hostOptions...)
		if err == nil {
			checkInjected(t, in, hosted)
		}

		if compileOnly(ctx, rt, in) != nil {
			return
		}
		require.NoError(t, compileOnly(ctx, rt, res.Wasm), "wazero compiles the input but not the output")
		require.NoError(t, compileOnly(ctx, rt, polled.Wasm), "wazero compiles the input but not the WithPoll output")
		if hosted != nil {
			require.NoError(t, compileOnly(ctx, rt, hosted.Wasm), "wazero compiles the input but not the output with the host's options")
		}
	})
}

// bodyFrame wraps instructions in a module that gives them something to
// refer to: types () -> () and (i32) -> (i32), a second function, a
// funcref table, a memory, a mutable i32 global, a declarative element
// segment for ref.func, and a passive data segment.
func bodyFrame(instrs []byte) []byte {
	return wasmMod(
		sec(1, vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x01, 0x7F, 0x01, 0x7F})),
		sec(3, vec([]byte{0x00}, []byte{0x01})),
		tableSec,
		memSec,
		sec(6, vec([]byte{0x7F, 0x01, 0x41, 0x00, 0x0B})),
		sec(9, vec([]byte{0x03, 0x00, 0x02, 0x00, 0x01})),
		sec(12, leb(1)),
		sec(10, vec(
			fnLocals(vec([]byte{0x02, 0x7F}, []byte{0x01, 0x7E}), instrs...),
			fn(0x20, 0x00, 0x0B),
		)),
		sec(11, vec(cat([]byte{0x01}, str("data")))),
	)
}

// FuzzBodies fuzzes function bodies inside a fixed, valid module
// frame, where most inputs decode far enough for wazero to validate them.
// Besides FuzzRewrite's properties it checks that Rewrite accepts every
// body wazero accepts, so the two decoders agree on every instruction.
// The frame bounds what wazero can allocate, so it is safe to run wazero
// on every input.
func FuzzBodies(f *testing.F) {
	for _, body := range [][]byte{
		b(0x01, 0x0B),
		b(loopHeader, 0x0C, 0x00, 0x0B, 0x0B),
		b(0x41, 0x01, 0x04, 0x40, 0x02, 0x40, loopHeader, 0x0B, 0x0B, 0x05, loopHeader, 0x0B, 0x0B, 0x0B),
		b(0x02, 0x40, loopHeader, 0x41, 0x03, 0x0E, 0x02, 0x00, 0x01, 0x01, 0x0B, 0x0B, 0x0B),
		b(0x03, 0x7F, 0x41, 0x03, 0x0B, 0x1A, 0x41, 0x03, 0x03, 0x01, 0x0B, 0x1A, 0x0B),
		b(loopHeader, 0x43, 0x00, 0x00, 0x40, 0x40, 0xFC, 0x00, 0x1A,
			0x41, 0x03, 0x41, 0x03, 0x41, 0x03, 0xFC, 0x0B, 0x00, 0x0B,
			0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xFC, 0x08, 0x00, 0x00, 0xFC, 0x09, 0x00, 0x0B),
		b(0xFD, 0x0C, make16(0x03), 0xFD, 0x0C, make16(0x03), 0xFD, 0x0D, make16(0x03),
			0xFD, 0x15, 0x03, 0x1A, loopHeader, 0x41, 0x00, 0xFD, 0x00, 0x04, 0x03, 0xFD, 0x1B, 0x03, 0x1A, 0x0B,
			0x41, 0x00, 0x41, 0x00, 0xFD, 0x00, 0x04, 0x00, 0xFD, 0x54, 0x00, 0x00, 0x03, 0x1A, 0x0B),
		b(0xD0, 0x70, 0xD1, 0x1A, 0xD2, 0x01, 0x1A, 0x41, 0x03, 0xC0, 0x41, 0x03, 0x41, 0x01, 0x1C, 0x01, 0x7F, 0x1A,
			loopHeader, 0x41, 0x07, 0x41, 0x00, 0x11, 0x01, 0x00, 0x1A, 0x0B, 0x23, 0x00, 0x24, 0x00, 0x0B),
		b(0x41, 0x00, 0x12, 0x01, 0x0B),
		b(0x41, 0x00, 0x28, 0x02, 0x00, 0x20, 0x00, 0x36, 0x02, 0x04, 0x3F, 0x00, 0x40, 0x00, 0x1A, 0x1A, 0x0B),
		b(0x41, 0x00, 0xFE, 0x10, 0x02, 0x00, 0x1A, 0xFE, 0x03, 0x00, 0x0B),
		// block (result funcref) ref.func 1 br_on_non_null 0 unreachable end; i32.const 1 call_ref (type 1) drop
		b(0x02, 0x70, 0xD2, 0x01, 0xD6, 0x00, 0x00, 0x0B, 0xD4, 0x41, 0x01, 0x1A, 0x1A, 0x0B),
	} {
		f.Add(body)
	}
	ctx := f.Context()
	// Every feature wazero has, so that the decoders are compared on
	// every instruction wazero knows.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(
		api.CoreFeaturesV2|experimental.CoreFeaturesThreads|experimental.CoreFeaturesTailCall|
			experimental.CoreFeaturesExtendedConst|experimental.CoreFeaturesExceptionHandling|
			experimental.CoreFeaturesTypedFunctionReferences))
	f.Cleanup(func() { rt.Close(context.WithoutCancel(ctx)) })

	f.Fuzz(func(t *testing.T, body []byte) {
		in := bodyFrame(body)
		cerr := compileOnly(ctx, rt, in)
		res, err := Rewrite(in, testGlobal)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "instrument: "), err.Error())
			require.Error(t, cerr, "wazero compiles the input but Rewrite refused it: %v", err)
			return
		}
		polled, err := Rewrite(in, testGlobal, WithPoll(1000))
		require.NoError(t, err)
		hosted, err := Rewrite(in, testGlobal, hostOptions...)
		require.NoError(t, err)
		checkInjected(t, in, hosted)
		if cerr != nil {
			return
		}
		require.NoError(t, compileOnly(ctx, rt, res.Wasm), "wazero compiles the input but not the output")
		require.NoError(t, compileOnly(ctx, rt, polled.Wasm), "wazero compiles the input but not the WithPoll output")
		require.NoError(t, compileOnly(ctx, rt, hosted.Wasm), "wazero compiles the input but not the output with the host's options")
	})
}

// compileOnly compiles wasm and closes the result. A panic inside wazero
// is returned as an error: wazero v1.12.0 panics (index out of range in
// its function validation) on some malformed bodies when exception
// handling is enabled, e.g. the body 0x1F 0x00 0x0B.
func compileOnly(ctx context.Context, rt wazero.Runtime, wasm []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("wazero panicked: %v", p)
		}
	}()
	c, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return err
	}
	return c.Close(ctx)
}
