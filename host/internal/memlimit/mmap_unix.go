//go:build unix

package memlimit

import (
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// region is a reservation of address space for one memory. A mapping
// without access is not charged against the system's commit limit; only
// what open makes writable is.
type region struct {
	b     []byte
	freed *atomic.Bool
}

// reserve reserves limit bytes of address space, none of it accessible
// yet, or returns nil when the system refuses.
func reserve(limit uint64) *region {
	if limit == 0 || limit > 1<<48 {
		return nil
	}
	b, err := unix.Mmap(-1, 0, int(limit), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil
	}
	r := &region{b: b, freed: new(atomic.Bool)}
	// A memory dropped without Free (an instantiation that failed inside
	// wazero) is unmapped once unreachable.
	runtime.AddCleanup(r, func(r region) { r.release() }, *r)
	return r
}

// protect is unix.Mprotect; the tests make it fail.
var protect = unix.Mprotect

// open makes [from, to) readable and writable. Pages never touched read as
// zero, as new wasm pages must.
func (r *region) open(from, to uint64) error {
	return protect(r.b[from:to], unix.PROT_READ|unix.PROT_WRITE)
}

// drop hands the pages of [0, n) back to the system; the range stays
// mapped and readable, and reads as zeros where the system drops them.
func (r *region) drop(n uint64) {
	if n > 0 {
		_ = unix.Madvise(r.b[:n], unix.MADV_DONTNEED)
	}
}

// release unmaps the reservation, once: the address range may belong to
// another mapping afterwards.
func (r region) release() {
	if r.freed.CompareAndSwap(false, true) {
		_ = unix.Munmap(r.b)
	}
}

// released reports whether the reservation is unmapped.
func (r *region) released() bool { return r.freed.Load() }
