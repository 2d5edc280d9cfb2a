package memlimit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemory(t *testing.T) {
	const page = 65536
	m := New(4 * page)
	assert.Equal(t, uint64(4*page), m.Limit())

	b := m.Reallocate(page)
	require.Len(t, b, page)
	b[0], b[page-1] = 1, 2
	assert.Equal(t, uint64(page), m.Size())

	for _, size := range []uint64{2 * page, 3 * page, 4 * page} {
		b = m.Reallocate(size)
		require.Len(t, b, int(size))
		assert.Equal(t, byte(1), b[0], "contents survive growth")
		assert.Equal(t, byte(2), b[page-1])
		for _, c := range b[page:] {
			if c != 0 {
				t.Fatalf("new pages are not zero at size %d", size)
			}
		}
		assert.LessOrEqual(t, uint64(cap(b)), uint64(4*page), "never reserves beyond the limit")
	}
	assert.False(t, m.Hit())

	assert.Nil(t, m.Reallocate(5*page))
	assert.True(t, m.Hit())
	assert.Equal(t, uint64(4*page), m.Size(), "a refused growth changes nothing")

	m.Free()
	assert.Zero(t, m.Size())
}

func TestInitialAboveLimit(t *testing.T) {
	const page = 65536
	m := New(4 * page)
	require.NoError(t, m.CheckInitial(4))
	err := m.CheckInitial(5)
	var ie *InitialError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, InitialError{Pages: 5, Limit: 4}, *ie)
	assert.EqualError(t, err, "the module declares an initial memory of 5 pages (0 MiB), above its limit of 4 pages (0 MiB)")

	// wazero slices the initial allocation without checking it: a nil
	// there would be an index panic deep in wazero, so Reallocate panics
	// with an error the host can recover and report.
	assert.PanicsWithError(t, ie.Error(), func() { m.Reallocate(5 * page) })
	assert.True(t, m.Hit())
	assert.Zero(t, m.Size())
}

func TestGrowFromEmpty(t *testing.T) {
	const page = 65536
	m := New(2 * page)
	assert.Empty(t, m.Reallocate(0), "a memory of 0 pages")
	assert.Len(t, m.Reallocate(2*page), 2*page)
	assert.Nil(t, m.Reallocate(3*page), "growing past the limit is refused, not a panic")
	assert.True(t, m.Hit())
}
