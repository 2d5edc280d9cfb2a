package memlimit

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestMappedMemoryGoesBack: a memory lives outside the Go heap, grows in
// place, and its pages leave the process's resident set when it is freed,
// not when the collector runs.
func TestMappedMemoryGoesBack(t *testing.T) {
	const page, pages = 65536, 1024 // 64 MiB
	m := New(pages * page)
	b := m.Reallocate(page)
	require.True(t, m.Mapped())
	at := unsafe.Pointer(unsafe.SliceData(b))
	b[0] = 7
	b = m.Reallocate(pages * page)
	assert.Equal(t, at, unsafe.Pointer(unsafe.SliceData(b)), "grows in place")
	assert.Equal(t, byte(7), b[0])

	before := residentKiB(t)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	touched := residentKiB(t)
	require.Greater(t, touched-before, int64(pages*page/1024*9/10), "the touched pages are resident")
	m.Free()
	after := residentKiB(t)
	t.Logf("resident: %d KiB before, %d KiB touched, %d KiB freed", before, touched, after)
	assert.Greater(t, touched-after, int64(pages*page/1024*9/10), "Free returns the pages to the system")
	assert.False(t, m.Mapped())
}

func residentKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestUnmappedKeepsTheOldMapping: a memory the system refuses to open
// more of moves into the Go heap with its contents, and a slice of the old
// memory taken before the move still reads (zeros, its pages handed back)
// instead of killing the process, until Free unmaps it.
func TestUnmappedKeepsTheOldMapping(t *testing.T) {
	const page = 65536
	m := New(64 * page)
	b := m.Reallocate(4 * page)
	require.True(t, m.Mapped())
	for i := range b {
		b[i] = 7
	}
	view := b[page : 2*page] // as a host function's request would be
	old := m.mapped

	protect = func([]byte, int) error { return unix.ENOMEM }
	t.Cleanup(func() { protect = unix.Mprotect })
	b = m.Reallocate(8 * page)
	require.NotNil(t, b, "the guest goes on, within its limit")
	assert.False(t, m.Mapped())
	assert.Len(t, b, 8*page)
	assert.Equal(t, byte(7), b[4*page-1], "the contents moved")
	assert.Equal(t, byte(0), b[4*page], "new pages are zero")

	sum := 0
	for _, c := range view {
		sum += int(c) // SIGSEGV here were the old mapping gone
	}
	t.Logf("the old view reads %d after the move", sum)
	assert.False(t, old.freed.Load(), "mapped until Free")
	m.Free()
	assert.True(t, old.freed.Load(), "Free unmaps it")
}

// TestPopulate: the pages an image copied into a memory writes are
// resident once it is allocated, the copy made in a call per run of
// pages; the pages between them are not, and read as zeros.
func TestPopulate(t *testing.T) {
	const page = 65536
	t.Cleanup(func() { SetFileImages(true) })
	SetFileImages(false)
	ps := uint64(os.Getpagesize())
	mem := make([]byte, 6*page)
	// Two ranges sharing a page, one alone, one past the initial size.
	ranges := [][2]uint64{{10, 20}, {30, ps + 1}, {8 * ps, 8*ps + 1}, {5 * page, 6 * page}}
	for _, r := range ranges {
		for i := r[0]; i < r[1]; i++ {
			mem[i] = 9
		}
	}
	img := NewImage(mem, ranges)
	defer img.Close()
	require.False(t, img.Mapped())
	m := New(64 * page)
	m.Start(img)
	b := m.Reallocate(4 * page)
	require.True(t, m.Mapped())
	defer m.Free()
	vec := make([]byte, len(b)/int(ps))
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	require.Zero(t, errno, "mincore")
	var resident []int
	for i, v := range vec {
		if v&1 != 0 {
			resident = append(resident, i)
		}
	}
	assert.Equal(t, []int{0, 1, 8}, resident, "pages resident")
	assert.Equal(t, mem[:4*page], b, "the image, cut at the memory's size")
}
