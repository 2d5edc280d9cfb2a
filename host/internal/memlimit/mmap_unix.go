//go:build unix

package memlimit

import (
	"runtime"
	"sync/atomic"
	"syscall"
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
	b, err := syscall.Mmap(-1, 0, int(limit), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	r := &region{b: b, freed: new(atomic.Bool)}
	// A memory dropped without Free (an instantiation that failed inside
	// wazero) is unmapped once unreachable.
	runtime.AddCleanup(r, func(r region) { r.release() }, *r)
	return r
}

// open makes [from, to) readable and writable. Pages never touched read as
// zero, as new wasm pages must.
func (r *region) open(from, to uint64) error {
	return syscall.Mprotect(r.b[from:to], syscall.PROT_READ|syscall.PROT_WRITE)
}

// release unmaps the reservation, once: the address range may belong to
// another mapping afterwards.
func (r region) release() {
	if r.freed.CompareAndSwap(false, true) {
		_ = syscall.Munmap(r.b)
	}
}
