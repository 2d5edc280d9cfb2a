package instrument

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRewriteMergeDataAmplifies: a hostile module of 4,000 one-byte data
// segments, each 4,095 bytes after the last, is about 32 KB; Rewrite
// merges them into one segment of 16 MiB of zeros, in the host's heap,
// before wazero even validates the module. The gap may be as wide as
// mergeGap for every 8 bytes of input: a module at MaxModuleSize (64 MiB)
// becomes a 4 GiB data segment (offsets reach 4 GiB), and the compile's
// memory estimate (by the input's size) knows nothing of it.
func TestRewriteMergeDataAmplifies(t *testing.T) {
	const n = 4000
	segs := make([][]byte, n)
	for i := range segs {
		segs[i] = dataSeg(int32(i*4095), "x")
	}
	in := dataMod(segs...)
	res, err := Rewrite(in, "interrupt")
	require.NoError(t, err)
	t.Logf("input %d bytes, rewritten %d bytes (%.0f×)", len(in), len(res.Wasm), float64(len(res.Wasm))/float64(len(in)))
	assert.LessOrEqual(t, len(res.Wasm), 2*len(in)+1<<20, "the rewrite may grow a module by about its size, not by hundreds of times")
}
