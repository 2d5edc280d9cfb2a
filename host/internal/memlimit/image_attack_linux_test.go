package memlimit

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImageClosedBeforeAllocation: a memory told to start as an image
// that is closed before its first allocation (its snapshot released while
// an instance was being made) never starts as another image, one whose
// file took the closed one's descriptor number since.
func TestImageClosedBeforeAllocation(t *testing.T) {
	mem, ranges := imageOf(2)
	other := bytes.Repeat([]byte{0xAB}, len(mem))
	a := NewImage(mem, ranges)
	require.True(t, a.Mapped())
	m := New(4 * PageSize)
	m.Start(a)
	a.Close()
	b := NewImage(other, [][2]uint64{{0, uint64(len(other))}})
	defer b.Close()
	require.True(t, b.Mapped())
	t.Logf("descriptors: closed image %d, new image %d", a.file.fd, b.file.fd)
	got := m.Reallocate(2 * PageSize)
	defer m.Free()
	leaked := 0
	for i := range got {
		if got[i] == 0xAB && mem[i] != 0xAB {
			leaked++
		}
	}
	assert.Zero(t, leaked, "bytes of the other image in the memory")
}
