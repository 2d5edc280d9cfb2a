package host_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
)

// TestHostCallWholeMemoryRequest: a guest that hands a host function a
// request of its whole memory (16 MiB) is refused, and the host allocates
// for it no more than a small part of that: a guest's request never costs
// the host its size, whatever the import (bigreq, hand-written).
func TestHostCallWholeMemoryRequest(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	_, err := h.Load(loadCtx(t), fixture(t, "bigreq"), host.LoadOptions{Capabilities: []string{abi.CapLog, abi.CapKV, abi.CapTimer, "http:localhost", "messaging"}})
	require.NoError(t, err)
	const size = 16 << 20
	for _, port := range []string{"s", "t", "k", "h", "e", "n", "a", "l"} {
		t.Run(port, func(t *testing.T) {
			_, err := invoke(t, h, "bigreq", "c", port, nil) // the instance, warm
			require.NoError(t, err)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := invoke(t, h, "bigreq", "c", port, nil)
			runtime.ReadMemStats(&after)
			require.NoError(t, err)
			require.Len(t, resp.Payload, 1)
			switch port {
			case "l":
			case "s":
				assert.Equal(t, abi.StatusBadRequest, abi.Status(resp.Payload[0]), "a name of 16 MiB")
			default:
				assert.NotEqual(t, abi.StatusOK, abi.Status(resp.Payload[0]), "a request of 16 MiB of zeros")
			}
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(size/4), "bytes the host allocated for the call")
		})
	}
}
