package memlimit

import "golang.org/x/sys/unix"

// populate makes the pages of [from, to), whole pages of the system,
// resident and writable at once. A kernel without MADV_POPULATE_WRITE
// (before 5.14) refuses it; the pages are then made resident as they are
// written, as without.
func (r *region) populate(from, to uint64) {
	_ = unix.Madvise(r.b[from:to], unix.MADV_POPULATE_WRITE)
}
