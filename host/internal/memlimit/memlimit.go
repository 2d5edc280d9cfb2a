// Package memlimit backs a wasm instance's linear memory with memory that
// refuses to grow past a limit and goes back to the operating system when
// the instance closes.
//
// wazero's runtime-wide memory limit applies to every module alike; tinyhost
// needs one limit per module, and it needs to know afterwards that the limit
// was the reason a guest died. A [Memory] is passed to wazero through
// experimental.WithMemoryAllocator when an instance is created: a refused
// Reallocate makes the guest's memory.grow return -1, which a Go guest turns
// into "fatal error: out of memory" and an exit, and [Memory.Hit] tells the
// host to report that as a memory-limit breach rather than a plain trap.
//
// wazero calls the allocator in three places (internal/wasm/memory.go of
// v1.12): NewMemoryInstance, which reallocates to the declared initial size
// and slices the result to that size without checking it; Grow, which
// handles nil as a failed memory.grow; and the instance's Close, which
// frees. Only the first cannot take a refusal, so the initial size must be
// checked against the limit before instantiation ([Memory.CheckInitial]
// does it); should it be above the limit all the same, Reallocate panics
// with an *InitialError, which the instantiating code recovers, rather than
// hand wazero a nil slice to index. Shared memories (the threads proposal)
// need a buffer that never moves; a Memory moves as it grows, so it must not
// back one, and the host's runtime does not enable threads, which makes a
// module declaring a shared memory fail to compile.
//
// Where the system has mmap, the memory lives outside the Go heap: the
// first allocation reserves address space for the whole limit, without
// access and without counting against the system's commit charge; growing
// opens pages for reading and writing, in place (nothing is copied, and
// the buffer never moves); Free unmaps it all at once, so an instance that
// closes returns its memory at once, rather than when the collector runs
// and the runtime scavenges. Should a reservation fail (address space
// exhausted), or elsewhere, the memory is a Go slice as before; should
// opening more of it fail, the memory moves into a Go slice, and the
// reservation stays mapped, its pages handed back, until Free. Either way
// the limit is enforced alike.
//
// A memory may start as an [Image], the state of an initialised instance:
// where the system has sealed memory files, the image is mapped
// copy-on-write over the start of the reservation, so that an instance
// starts without copying it, and shares its pages until it writes them;
// otherwise it is copied in as the memory is allocated.
package memlimit

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// PageSize is the size of a wasm page in bytes.
const PageSize = 65536

// Memory is an experimental.LinearMemory bounded by a limit in bytes. It is
// grown by the instance's goroutine only; Size and Hit may be read from any
// goroutine.
type Memory struct {
	buf   []byte
	limit uint64
	size  atomic.Uint64
	hit   atomic.Bool
	made  bool // the initial allocation is done

	// mapped is the reservation, when the memory lives outside the Go
	// heap; open is how much of it is readable and writable.
	mapped *region
	open   uint64
	// left is the reservation the memory moved out of (see unmapped),
	// kept mapped until Free.
	left *region
	// image is what the memory starts as (see Start), until its first
	// allocation.
	image *Image
	// runs is how many runs of an image are mapped into the memory
	// (takeAreas), until Free.
	runs int
}

// InitialError is the panic of a Reallocate asked for an initial size
// above the limit, and the error of CheckInitial.
type InitialError struct {
	Pages, Limit uint64 // the declared initial size and the limit, in pages
}

func (e *InitialError) Error() string {
	return fmt.Sprintf("the module declares an initial memory of %d pages (%d MiB), above its limit of %d pages (%d MiB)",
		e.Pages, e.Pages*PageSize>>20, e.Limit, e.Limit*PageSize>>20)
}

// Allocator returns an experimental.MemoryAllocator that hands out m. It
// must be used for exactly one instance.
func (m *Memory) Allocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(_, _ uint64) experimental.LinearMemory { return m })
}

// New returns a Memory that refuses to grow beyond limit bytes.
func New(limit uint64) *Memory { return &Memory{limit: limit} }

// CheckInitial returns an *InitialError when a memory of pages pages is
// above m's limit: an instance declaring it cannot be backed by m.
func (m *Memory) CheckInitial(pages uint32) error {
	if uint64(pages)*PageSize > m.limit {
		return &InitialError{Pages: uint64(pages), Limit: m.limit / PageSize}
	}
	return nil
}

// Start says that the memory starts as img, an image of at most its
// initial size: its first allocation maps the image, or copies it in. img
// must stay open until then.
func (m *Memory) Start(img *Image) { m.image = img }

// Reallocate implements experimental.LinearMemory. It returns nil, and
// records the breach, when size exceeds the limit; for the initial size,
// which wazero cannot refuse, it panics with an *InitialError instead.
func (m *Memory) Reallocate(size uint64) []byte {
	if size > m.limit {
		m.hit.Store(true)
		if !m.made {
			panic(&InitialError{Pages: (size + PageSize - 1) / PageSize, Limit: m.limit / PageSize})
		}
		return nil
	}
	if m.made {
		return m.resize(size)
	}
	m.made = true
	m.mapped = reserve(m.limit)
	img := m.image
	m.image = nil
	mapped := false
	if img != nil && m.mapped != nil && img.fits(size) && takeAreas(len(img.runs)) {
		m.runs = len(img.runs)
		mapped = img.file.mapInto(m.mapped, img.runs)
		if m.mapped.released() {
			m.mapped = nil
		}
	}
	// Opening the reservation leaves the image's mappings as they are
	// (they are readable and writable already), and opens the rest.
	b := m.resize(size)
	if img != nil && b != nil && (!mapped || m.mapped == nil) {
		if m.mapped != nil {
			m.populate(img.ranges, size)
		}
		img.copyTo(b)
	}
	return b
}

// resize makes the memory size bytes.
func (m *Memory) resize(size uint64) []byte {
	if m.mapped != nil {
		if size > m.open {
			if err := m.mapped.open(m.open, size); err != nil {
				return m.unmapped(size)
			}
			m.open = size
		}
		m.buf = m.mapped.b[:size:size]
		m.size.Store(size)
		return m.buf
	}
	return m.grow(size)
}

// populate makes the pages of written ([from, to) in bytes, in order)
// within size resident and writable, those of ranges that share or abut
// a page at once, before an image is copied over them: a call each costs
// the system less than a fault on every page the copy touches.
func (m *Memory) populate(written [][2]uint64, size uint64) {
	var from, to uint64
	for _, w := range written {
		f := min(w[0], size) / pageSize * pageSize
		t := min((w[1]+pageSize-1)/pageSize*pageSize, size)
		if f >= t {
			continue
		}
		if to > from && f > to {
			m.mapped.populate(from, to)
			from = f
		} else if to == from {
			from = f
		}
		to = max(to, t)
	}
	if to > from {
		m.mapped.populate(from, to)
	}
}

// pageSize is the system's page size, by which memory is made resident.
var pageSize = uint64(os.Getpagesize())

// unmapped moves the memory into the Go heap, for when the system refuses
// to open more of the reservation: the guest goes on, within its limit.
// The reservation stays mapped until Free, its pages handed back: a slice
// of the old memory still held somewhere (a view wazero or a host function
// took before the move) reads zeros, or the image the memory started as
// (handed back, a page of a private mapping of a file reads the file
// again), where an unmapped one would kill the process with SIGSEGV, or
// read another instance's memory mapped there since.
func (m *Memory) unmapped(size uint64) []byte {
	b := make([]byte, len(m.buf), size)
	copy(b, m.buf)
	m.buf = b
	m.mapped.drop(m.open)
	m.left = m.mapped
	m.mapped, m.open = nil, 0
	return m.grow(size)
}

// grow grows a memory that lives in the Go heap.
func (m *Memory) grow(size uint64) []byte {
	if size <= uint64(cap(m.buf)) {
		// Bytes past len were never visible to the guest, so they are
		// still zero, as new wasm pages must be.
		m.buf = m.buf[:size]
	} else {
		// Grow geometrically to keep the copies amortised, but never
		// reserve beyond the limit.
		c := max(size, min(2*uint64(cap(m.buf)), m.limit))
		b := make([]byte, size, c)
		copy(b, m.buf)
		m.buf = b
	}
	m.size.Store(size)
	return m.buf
}

// Free implements experimental.LinearMemory.
func (m *Memory) Free() {
	m.buf = nil
	m.size.Store(0)
	if m.mapped != nil {
		m.mapped.release()
		m.mapped, m.open = nil, 0
	}
	untakeAreas(m.runs)
	m.runs = 0
	if m.left != nil {
		m.left.release()
		m.left = nil
	}
}

// Mapped reports whether the memory lives outside the Go heap.
func (m *Memory) Mapped() bool { return m.mapped != nil }

// Size returns the current size of the memory in bytes.
func (m *Memory) Size() uint64 { return m.size.Load() }

// Limit returns the limit in bytes.
func (m *Memory) Limit() uint64 { return m.limit }

// Hit reports whether the guest ever asked for more than the limit.
func (m *Memory) Hit() bool { return m.hit.Load() }
