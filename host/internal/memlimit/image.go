package memlimit

import "sync/atomic"

// Image is the memory an instance of a snapshot starts with: the ranges of
// a memory that hold its non-zero bytes, the rest being zero. Where the
// system allows it (Linux), the bytes are written once into a sealed
// memory file, which each instance maps copy-on-write over the pages that
// hold them: starting one copies nothing, its pages are the image's until
// it writes them, and no instance can change the image. Elsewhere, or if
// the file cannot be made or mapped, each instance copies the bytes into
// its memory as it is allocated. Either way an instance reads the image
// and its own writes only.
type Image struct {
	ranges [][2]uint64
	// file holds the image where there is one, mapped over runs; data
	// otherwise, the bytes of ranges one after another.
	file *imageFile
	runs [][2]uint64
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
func NewImage(mem []byte, ranges [][2]uint64) *Image { return NewImageWithin(mem, ranges, ^uint64(0)) }

// NewImageWithin is NewImage, with a file only if the pages it may hold
// (those its runs span, as instances read the zeros between) are at most
// maxFile bytes: a byte per page of the system would otherwise make the
// file hold every page, when the copy holds the bytes.
func NewImageWithin(mem []byte, ranges [][2]uint64, maxFile uint64) *Image {
	img := &Image{ranges: ranges}
	if len(ranges) == 0 {
		return img // zeros: nothing to map or copy
	}
	if runs := mapRuns(ranges, uint64(len(mem))); runs != nil && spans(runs) <= maxFile && fileImages.Load() {
		if f, err := newImageFile(mem, ranges, runs[len(runs)-1][1]); err == nil {
			img.file, img.runs = f, runs
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

// maxRuns bounds the mappings of an image's file in one memory: each is an
// area of the process's address map, of which a process may have about
// 65,000 (vm.max_map_count).
const maxRuns = 4

// mapRuns returns the runs of whole pages of the file that memories map,
// [from, to), within size: the pages of ranges, joined across gaps up to a
// length that doubles until they are at most maxRuns. It returns nil when
// the pages of zeros the runs span would outnumber those of the image: an
// instance writing to one adds a page to the file (once, for every
// instance), which is bounded thus by the image's own size.
func mapRuns(ranges [][2]uint64, size uint64) [][2]uint64 {
	if size%pageSize != 0 {
		return nil
	}
	var pages [][2]uint64
	var held uint64
	for _, r := range ranges {
		from, to := r[0]/pageSize*pageSize, min((r[1]+pageSize-1)/pageSize*pageSize, size)
		if n := len(pages); n > 0 && from <= pages[n-1][1] {
			held += max(to, pages[n-1][1]) - pages[n-1][1]
			pages[n-1][1] = max(to, pages[n-1][1])
			continue
		}
		pages = append(pages, [2]uint64{from, to})
		held += to - from
	}
	for gap := pageSize; len(pages) > maxRuns; gap *= 2 {
		joined := pages[:1]
		for _, p := range pages[1:] {
			if last := &joined[len(joined)-1]; p[0]-last[1] <= gap {
				last[1] = p[1]
			} else {
				joined = append(joined, p)
			}
		}
		pages = joined
	}
	var spanned uint64
	for _, p := range pages {
		spanned += p[1] - p[0]
	}
	if spanned-held > held {
		return nil
	}
	return pages
}

// fits reports whether a memory of size bytes can map the image.
func (img *Image) fits(size uint64) bool {
	return img.file != nil && img.runs[len(img.runs)-1][1] <= size
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

// spans is the bytes runs span.
func spans(runs [][2]uint64) uint64 {
	var n uint64
	for _, r := range runs {
		n += r[1] - r[0]
	}
	return n
}
