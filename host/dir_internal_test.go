package host

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDirHeldBytesBound: the bound on the bytes the modules directory
// holds saturates for a MaxModuleSize of any size, rather than wrapping
// into a count that holds every file at once: between one and
// dirHeldFiles files of MaxModuleSize are held at once, and a file given
// back makes room for another.
func TestDirHeldBytesBound(t *testing.T) {
	for _, size := range []int64{64 << 20, math.MaxInt64 / 2, math.MaxInt64} {
		b := fileBytes{max: timesHeld(size)}
		require.Positive(t, b.max, "MaxModuleSize %d", size)
		// A context already cancelled: take returns at once, taken or not.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var gives []func()
		for range dirHeldFiles + 1 {
			give, err := b.take(ctx, size)
			if err != nil {
				assert.ErrorIs(t, err, context.Canceled)
				break
			}
			gives = append(gives, give)
		}
		assert.NotEmpty(t, gives, "MaxModuleSize %d: no file taken", size)
		require.LessOrEqual(t, int64(len(gives)), dirHeldFiles, "MaxModuleSize %d: a file beyond the bound was taken", size)
		gives[0]()
		give, err := b.take(ctx, size)
		require.NoError(t, err, "MaxModuleSize %d: no room after a file was given back", size)
		give()
	}
}
