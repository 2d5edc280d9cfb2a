package memlimit

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openFiles counts the image files open in the process, bounded to leave
// descriptors to the rest of the host.
var openFiles atomic.Int64

// runAreas counts the address-map areas that images mapped into memories
// add to the process (two per run: the run, and the rest of the
// reservation split around it), bounded by maxRunAreas to leave the
// system's limit on them (vm.max_map_count) to the rest of the process:
// the Go runtime dies when a mapping it needs is refused. Beyond, images
// are copied, which adds none.
var (
	runAreas    atomic.Int64
	maxRunAreas = mapCountLimit() / 4
)

// mapCountLimit is the system's limit on a process's address-map areas.
func mapCountLimit() int64 {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return 65530 // the kernel's default
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 65530
	}
	return n
}

// takeAreas counts the areas mapping runs would add, and says whether
// they fit; untakeAreas gives them back.
func takeAreas(runs int) bool {
	n := int64(2 * runs)
	if runAreas.Add(n) > maxRunAreas {
		runAreas.Add(-n)
		return false
	}
	return true
}

func untakeAreas(runs int) { runAreas.Add(-int64(2 * runs)) }

// imageFileName names image files, in /proc/<pid>/maps among others.
const imageFileName = "tinyhost-snapshot"

// imageFile is a sealed memory file holding an image. Its descriptor is
// used under mu's read lock and closed under its write lock, so that a
// memory told to start as an image closed since never maps or reads
// another file that took the same descriptor number.
type imageFile struct {
	mu     sync.RWMutex
	fd     int
	closed bool
}

// newImageFile writes the ranges of mem into a new memory file of size
// bytes and seals it: its size and content can no longer change, by this
// process or any other. Zero runs outside ranges are left as holes, which
// take no memory until an instance reads them.
func newImageFile(mem []byte, ranges [][2]uint64, size uint64) (*imageFile, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return nil, err
	}
	if n := openFiles.Add(1); uint64(n) > min(rl.Cur/4, 1024) {
		openFiles.Add(-1)
		return nil, errors.New("too many image files")
	}
	// Not executable, sealed so (a kernel before 6.3 does not know the
	// flag: without it, the file is sealed against writes all the same).
	fd, err := unix.MemfdCreate(imageFileName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if err == unix.EINVAL {
		fd, err = unix.MemfdCreate(imageFileName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		openFiles.Add(-1)
		return nil, err
	}
	f := &imageFile{fd: fd}
	if err := f.write(mem, ranges, size); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

func (f *imageFile) write(mem []byte, ranges [][2]uint64, size uint64) error {
	if err := unix.Ftruncate(f.fd, int64(size)); err != nil {
		return err
	}
	for _, r := range ranges {
		for b, off := mem[r[0]:r[1]], int64(r[0]); len(b) > 0; {
			n, err := unix.Pwrite(f.fd, b, off)
			if err != nil {
				return err
			}
			b, off = b[n:], off+int64(n)
		}
	}
	_, err := unix.FcntlInt(uintptr(f.fd), unix.F_ADD_SEALS,
		unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL)
	return err
}

// mapInto maps the runs of the file, private and writable, over the same
// bytes of r: the memory's writes go to pages of its own. It reports
// whether it mapped them all; if not, the runs it mapped hold the image,
// and r is still reserved, or released when it could not be kept.
func (f *imageFile) mapInto(r *region, runs [][2]uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return false
	}
	for _, run := range runs {
		at, n := unsafe.Pointer(&r.b[run[0]]), uintptr(run[1]-run[0])
		_, err := unix.MmapPtr(f.fd, int64(run[0]), at, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
		if err == nil {
			continue
		}
		// A kernel before 6.12 may have unmapped the range before
		// failing: it is reserved again, else the whole reservation is
		// given up now, before another mapping can take the hole (Free
		// would unmap it).
		if _, err := unix.MmapPtr(-1, 0, at, n, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED); err != nil {
			r.release()
		}
		return false
	}
	return true
}

// readAt reads len(b) bytes of the file at off into b; what cannot be
// read stays zero.
func (f *imageFile) readAt(b []byte, off uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for !f.closed && len(b) > 0 {
		n, err := unix.Pread(f.fd, b, int64(off))
		if err != nil || n == 0 {
			return
		}
		b, off = b[n:], off+uint64(n)
	}
}

func (f *imageFile) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		_ = unix.Close(f.fd)
		openFiles.Add(-1)
	}
}
