package host_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestEmitBound calls a guest that emits a million messages of 6 bytes in
// one call, ignoring every refusal: the host takes MaxEmits (1024) of
// them and no more, the call fails as too large, naming the bound, and
// the host allocates, in all, at most emitBound while the call runs (it
// used to hold about 200 bytes a message: 200 MiB).
func TestEmitBound(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	_, err := h.Load(loadCtx(t), fixture(t, "emitter"), host.LoadOptions{})
	require.NoError(t, err)

	const emitBound = 4 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = invoke(t, h, "emitter", "e", "many", nil)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a million emits: %d bytes allocated by the process during the call; %v", allocated, err)
	assert.Equal(t, api.KindTooLarge, kindOf(err))
	assert.ErrorContains(t, err, "emitted more than 1024 messages in one call (MaxEmits)")
	assert.LessOrEqual(t, allocated, uint64(emitBound))

	// A module allowed more messages is bounded by their real size.
	_, err = h.Load(loadCtx(t), fixture(t, "emitter"), host.LoadOptions{Name: "roomy", Limits: api.Limits{MaxEmits: 2_000_000, MaxMessageSize: 16 << 20}})
	require.NoError(t, err)
	resp, err := invoke(t, h, "roomy", "e", "many", nil)
	// 16 MiB holds 16 MiB / (14 + 256) messages: the bytes bound the call.
	assert.Equal(t, api.KindTooLarge, kindOf(err))
	assert.ErrorContains(t, err, "emitted messages exceed 16777216 bytes in one call (MaxMessageSize, counting 256 bytes a message besides its encoding)")
	assert.Empty(t, resp.Emitted)
}
