// Package memlimit backs a wasm instance's linear memory with a Go slice
// that refuses to grow past a limit.
//
// wazero's runtime-wide memory limit applies to every module alike; tinyhost
// needs one limit per module, and it needs to know afterwards that the limit
// was the reason a guest died. A [Memory] is passed to wazero through
// experimental.WithMemoryAllocator when an instance is created: a refused
// Reallocate makes the guest's memory.grow return -1, which a Go guest turns
// into "fatal error: out of memory" and an exit, and [Memory.Hit] tells the
// host to report that as a memory-limit breach rather than a plain trap.
package memlimit

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// Memory is an experimental.LinearMemory bounded by a limit in bytes. It is
// grown by the instance's goroutine only; Size and Hit may be read from any
// goroutine.
type Memory struct {
	buf   []byte
	limit uint64
	size  atomic.Uint64
	hit   atomic.Bool
}

// Allocator returns an experimental.MemoryAllocator that hands out m. It
// must be used for exactly one instance.
func (m *Memory) Allocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(_, _ uint64) experimental.LinearMemory { return m })
}

// New returns a Memory that refuses to grow beyond limit bytes.
func New(limit uint64) *Memory { return &Memory{limit: limit} }

// Reallocate implements experimental.LinearMemory. It returns nil, and
// records the breach, when size exceeds the limit.
func (m *Memory) Reallocate(size uint64) []byte {
	if size > m.limit {
		m.hit.Store(true)
		return nil
	}
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
}

// Size returns the current size of the memory in bytes.
func (m *Memory) Size() uint64 { return m.size.Load() }

// Limit returns the limit in bytes.
func (m *Memory) Limit() uint64 { return m.limit }

// Hit reports whether the guest ever asked for more than the limit.
func (m *Memory) Hit() bool { return m.hit.Load() }
