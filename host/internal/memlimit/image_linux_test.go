package memlimit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// imageOf returns a memory of pages pages whose bytes are non-zero in a
// few runs, and the ranges holding them.
func imageOf(pages int) ([]byte, [][2]uint64) {
	mem := make([]byte, pages*PageSize)
	ranges := [][2]uint64{{8, 4000}, {PageSize + 100, PageSize + 9000}, {uint64(pages)*PageSize - 3, uint64(pages) * PageSize}}
	for _, r := range ranges {
		for i := r[0]; i < r[1]; i++ {
			mem[i] = byte(i%251) + 1
		}
	}
	return mem, ranges
}

// TestImage starts memories from an image, mapped and copied: each reads
// the image, grows into zeros, and sees its own writes only; one started
// after another wrote and was freed reads the image again, and the
// image's file refuses every change.
func TestImage(t *testing.T) {
	for _, mapped := range []bool{true, false} {
		name := map[bool]string{true: "mapped", false: "copied"}[mapped]
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { SetFileImages(true) })
			SetFileImages(mapped)
			mem, ranges := imageOf(3)
			img := NewImage(mem, ranges)
			defer img.Close()
			require.Equal(t, mapped, img.Mapped())
			start := func() (*Memory, []byte) {
				m := New(16 * PageSize)
				m.Start(img)
				b := m.Reallocate(3 * PageSize)
				require.True(t, m.Mapped())
				require.Equal(t, mem, b, "the memory starts as the image")
				return m, b
			}
			a, ab := start()
			defer a.Free()
			b, bb := start()
			defer b.Free()
			for i := range ab {
				ab[i] = 0xEE // every page of the image, and the zeros between
			}
			assert.Equal(t, mem, bb, "another memory of the image does not see the writes")
			ab = a.Reallocate(5 * PageSize)
			assert.Equal(t, make([]byte, 2*PageSize), ab[3*PageSize:], "growth past the image is zero")
			assert.Equal(t, byte(0xEE), ab[0])
			a.Free()
			c, cb := start() // as an instance recycled after a's calls
			defer c.Free()
			assert.Equal(t, mem, cb)

			if mapped {
				fd := img.file.fd
				_, err := unix.Pwrite(fd, []byte{1}, 0)
				assert.ErrorIs(t, err, unix.EPERM, "the file is sealed against writes")
				_, err = unix.Mmap(fd, 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
				assert.ErrorIs(t, err, unix.EPERM, "and against a shared writable mapping")
				assert.ErrorIs(t, unix.Ftruncate(fd, 0), unix.EPERM, "and against shrinking")
				got := make([]byte, len(mem))
				img.file.readAt(got, 0)
				assert.Equal(t, mem, got, "the file is the image still")
			}
		})
	}
}

// TestImageLargerThanMemory: an image past the memory's initial size is
// copied up to it, not mapped (a mapping past the memory's size would let
// growth reveal bytes the instance never had).
func TestImageLargerThanMemory(t *testing.T) {
	mem, ranges := imageOf(3)
	img := NewImage(mem, ranges)
	defer img.Close()
	m := New(16 * PageSize)
	m.Start(img)
	b := m.Reallocate(2 * PageSize)
	defer m.Free()
	assert.Equal(t, mem[:2*PageSize], b)
	b = m.Reallocate(3 * PageSize)
	assert.Equal(t, make([]byte, PageSize), b[2*PageSize:], "growth is zero")
}

// TestImageRuns: the file of an image is mapped over the pages that hold
// it, in at most maxRuns runs, so that an instance writing to the zeros
// between them writes anonymous memory, not new pages of the file; an
// image whose runs would span more zeros than data is copied instead.
func TestImageRuns(t *testing.T) {
	ps := pageSize
	assert.Equal(t, [][2]uint64{{0, 2 * ps}, {64 * ps, 65 * ps}},
		mapRuns([][2]uint64{{10, 20}, {ps - 1, ps + 1}, {64*ps + 3, 64*ps + 4}}, 128*ps), "the pages of the ranges")
	var islands [][2]uint64
	for i := range uint64(9) {
		islands = append(islands, [2]uint64{i * 3 * ps, i*3*ps + ps}) // a page, then two of zeros
	}
	assert.Nil(t, mapRuns(islands, 128*ps), "runs few enough would span more zeros than data")
	for i := range islands {
		islands[i][1] += ps
	}
	runs := mapRuns(islands, 128*ps)
	assert.LessOrEqual(t, len(runs), maxRuns)
	assert.Equal(t, [2]uint64{0, 26 * ps}, [2]uint64{runs[0][0], runs[len(runs)-1][1]})

	mem := make([]byte, 64*PageSize)
	mem[0], mem[len(mem)-1] = 1, 2
	img := NewImage(mem, [][2]uint64{{0, 1}, {uint64(len(mem) - 1), uint64(len(mem))}})
	defer img.Close()
	require.True(t, img.Mapped())
	require.Len(t, img.runs, 2)
	m := New(128 * PageSize)
	m.Start(img)
	b := m.Reallocate(64 * PageSize)
	defer m.Free()
	require.Equal(t, mem, b)
	before := fileKiB(t, img)
	for i := range b[:len(b)-1] {
		b[i] = 3
	}
	assert.Equal(t, before, fileKiB(t, img), "KiB of the file after the zeros between its runs are written")
	assert.Equal(t, byte(2), b[len(b)-1])
}

// fileKiB is the memory that img's file holds.
func fileKiB(t *testing.T, img *Image) int64 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(img.file.fd, &st))
	return st.Blocks / 2
}

// TestImageOfZeros: an image of zeros holds nothing, and a memory started
// as it is an ordinary one.
func TestImageOfZeros(t *testing.T) {
	before := imageFiles(t)
	img := NewImage(make([]byte, PageSize), nil)
	defer img.Close()
	assert.False(t, img.Mapped())
	assert.Equal(t, before, imageFiles(t))
	m := New(4 * PageSize)
	m.Start(img)
	b := m.Reallocate(PageSize)
	defer m.Free()
	assert.True(t, m.Mapped())
	assert.Equal(t, make([]byte, PageSize), b)
}

// TestImageUnmapped: a memory mapped from an image that the system
// refuses to open more of moves into the Go heap with the image and its
// writes.
func TestImageUnmapped(t *testing.T) {
	mem, ranges := imageOf(2)
	img := NewImage(mem, ranges)
	defer img.Close()
	require.True(t, img.Mapped())
	m := New(16 * PageSize)
	m.Start(img)
	b := m.Reallocate(2 * PageSize)
	defer m.Free()
	b[9] = 0xEE
	protect = func([]byte, int) error { return unix.ENOMEM }
	t.Cleanup(func() { protect = unix.Mprotect })
	b = m.Reallocate(4 * PageSize)
	require.False(t, m.Mapped())
	want := bytes.Clone(mem)
	want[9] = 0xEE
	assert.Equal(t, want, b[:2*PageSize])
	assert.Equal(t, make([]byte, 2*PageSize), b[2*PageSize:])
}

// TestImageDescriptors: an image holds one descriptor until Close, while
// memories map it or not; memories freed or not, none is left after.
func TestImageDescriptors(t *testing.T) {
	before := imageFiles(t)
	mem, ranges := imageOf(2)
	var imgs []*Image
	var mems []*Memory
	for range 5 {
		img := NewImage(mem, ranges)
		imgs = append(imgs, img)
		m := New(4 * PageSize)
		m.Start(img)
		m.Reallocate(2 * PageSize)
		mems = append(mems, m)
	}
	assert.Equal(t, before+5, imageFiles(t), "one descriptor per image")
	for _, img := range imgs {
		img.Close()
		img.Close() // once
	}
	assert.Equal(t, before, imageFiles(t), "none once the images are closed")
	for i, m := range mems {
		assert.Equal(t, mem, m.buf, "memory %d, mapped after its image's close", i)
		m.Free()
	}
}

// imageFiles counts the process's descriptors of image files.
func imageFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, "/memfd:tinyhost-snapshot") {
			n++
		}
	}
	return n
}

// TestImageAreasBounded: images mapped into memories add address-map
// areas to the process, which the system bounds (vm.max_map_count; the Go
// runtime dies when a mapping it needs is refused). Past the share of them
// images may take, a memory copies its image instead: here the share
// holds one memory's runs, and of ten memories of one image one maps it
// (the process maps the file twice, once per run), and all ten read it.
func TestImageAreasBounded(t *testing.T) {
	was := maxRunAreas
	t.Cleanup(func() { maxRunAreas = was })
	maxRunAreas = 4

	mem := make([]byte, 64*PageSize)
	mem[0], mem[len(mem)-1] = 1, 2
	img := NewImage(mem, [][2]uint64{{0, 1}, {uint64(len(mem) - 1), uint64(len(mem))}})
	defer img.Close()
	require.True(t, img.Mapped())
	require.Len(t, img.runs, 2)
	var ms []*Memory
	for range 10 {
		m := New(128 * PageSize)
		m.Start(img)
		require.Equal(t, mem, m.Reallocate(64*PageSize))
		ms = append(ms, m)
	}
	assert.Equal(t, 2, imageMappings(t), "mappings of the image's file in the process")
	for _, m := range ms {
		m.Free()
	}
	assert.Zero(t, imageMappings(t))
	assert.Zero(t, runAreas.Load())
}

// imageMappings counts the mappings of image files in the process.
func imageMappings(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	return strings.Count(string(b), "/memfd:"+imageFileName)
}
