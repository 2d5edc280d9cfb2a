package memlimit

import "sync/atomic"

// Image is the memory an instance of a snapshot starts with: the ranges of
// a memory that hold its non-zero bytes, the rest being zero. Where the
// system allows it (Linux), the bytes are written once into a sealed
// memory file, which each instance maps copy-on-write over the start of
// its memory: starting one copies nothing, its pages are the image's until
// it writes them, and no instance can change the image. Elsewhere, or if
// the file cannot be made or mapped, each instance copies the bytes into
// its memory as it is allocated. Either way an instance reads the image
// and its own writes only.
type Image struct {
	// size is the bytes of memory, from 0, that the image spans: the end
	// of its last range, in whole pages of the system.
	size   uint64
	ranges [][2]uint64
	// file holds the image where there is one; data otherwise, the bytes
	// of ranges one after another.
	file *imageFile
	data []byte
}

// fileImages turns the memory files off, for the tests of the copies.
var fileImages atomic.Bool

func init() { fileImages.Store(true) }

// SetFileImages says whether new images may be memory files (the
// default) or are always copied into each memory, and returns what it
// said before. It exists for tests of the copy.
func SetFileImages(on bool) bool { return fileImages.Swap(on) }

// NewImage returns the image of mem whose bytes outside ranges ([from,
// to) in bytes, in order, within mem) are zero. mem is read now and not
// kept. The image holds a file descriptor, or a copy of the ranges, until
// Close.
func NewImage(mem []byte, ranges [][2]uint64) *Image {
	img := &Image{ranges: ranges}
	if n := len(ranges); n > 0 {
		img.size = min((ranges[n-1][1]+pageSize-1)/pageSize*pageSize, uint64(len(mem)))
	}
	if img.size == 0 {
		return img // zeros: nothing to map or copy
	}
	if img.size%pageSize == 0 && fileImages.Load() {
		if f, err := newImageFile(mem, ranges, img.size); err == nil {
			img.file = f
			return img
		}
	}
	total := 0
	for _, r := range ranges {
		total += int(r[1] - r[0])
	}
	img.data = make([]byte, 0, total)
	for _, r := range ranges {
		img.data = append(img.data, mem[r[0]:r[1]]...)
	}
	return img
}

// Mapped reports whether instances map the image rather than copy it.
func (img *Image) Mapped() bool { return img.file != nil }

// Close releases the file or the copy. Memories already mapping the file
// keep their mappings.
func (img *Image) Close() {
	if img.file != nil {
		img.file.close()
	}
	img.data = nil
}

// copyTo writes the image into b, a memory of zeros: from the file where
// there is one.
func (img *Image) copyTo(b []byte) {
	at := 0
	for _, r := range img.ranges {
		from, to := min(r[0], uint64(len(b))), min(r[1], uint64(len(b)))
		if img.file != nil {
			img.file.readAt(b[from:to], from)
		} else {
			copy(b[from:to], img.data[at:])
		}
		at += int(r[1] - r[0])
	}
}
