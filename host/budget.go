package host

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// The default memory budget (Capacity.MemoryBytes) is budgetShare of the
// memory the host has, as budgetNum/budgetDen: the rest is the host's own
// (its Go heap besides linear memory, compiled code, gRPC buffers).
const (
	budgetNum = 3
	budgetDen = 4
)

// NoMemoryBound is the Capacity.MemoryBytes of a host that bounds no
// memory: 0 means "the default", derived from the machine.
const NoMemoryBound = ^uint64(0)

// unlimited is where a cgroup's limit means "none": cgroup v1 writes the
// largest page-aligned int64, v2 the word "max".
const unlimited = 1 << 60

// machine reads the memory the process has; a variable for the tests.
var machine = func() (uint64, string) { return machineMemory(os.DirFS("/")) }

// machineMemory returns the memory the process may use and where the
// figure comes from: the least memory limit of its cgroup and the
// cgroup's ancestors (v2 memory.max, v1 memory.limit_in_bytes), when
// there is one below physical memory, else physical memory (MemTotal of
// /proc/meminfo). It returns 0 when it can tell neither (not Linux). fsys
// is the root of the file system.
func machineMemory(fsys fs.FS) (uint64, string) {
	physical := meminfo(fsys)
	limit := cgroupLimit(fsys)
	switch {
	case limit > 0 && (physical == 0 || limit < physical):
		return limit, "cgroup memory limit"
	case physical > 0:
		return physical, "physical memory"
	}
	return 0, ""
}

// meminfo returns MemTotal of proc/meminfo in bytes, 0 without.
func meminfo(fsys fs.FS) uint64 {
	b, err := fs.ReadFile(fsys, "proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0
			}
			if len(f) == 3 && f[2] == "kB" {
				n <<= 10
			}
			return n
		}
	}
	return 0
}

// cgroupLimit returns the least memory limit of the process's cgroup and
// its ancestors, v2 or v1 (proc/self/cgroup says where they are); 0 when
// none is set.
func cgroupLimit(fsys fs.FS) uint64 {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0
	}
	var least uint64
	take := func(dir, file string) {
		// From the cgroup up to the root of the hierarchy. In a
		// container the cgroup's path may not exist under the mount,
		// which is then the container's own cgroup: its root counts.
		for p := path.Clean("/" + dir); ; p = path.Dir(p) {
			if n := readLimit(fsys, path.Join(strings.TrimPrefix(p, "/"), file)); n > 0 && (least == 0 || n < least) {
				least = n
			}
			if p == "/" {
				return
			}
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			take(path.Join("sys/fs/cgroup", parts[2]), "memory.max")
		case hasController(parts[1], "memory"):
			take(path.Join("sys/fs/cgroup/memory", parts[2]), "memory.limit_in_bytes")
		}
	}
	return least
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads a cgroup memory limit file: 0 when it is missing, "max"
// or unlimited.
func readLimit(fsys fs.FS, name string) uint64 {
	b, err := fs.ReadFile(fsys, strings.TrimPrefix(name, "/"))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n >= unlimited {
		return 0
	}
	return n
}

// defaultBudget is the default Capacity.MemoryBytes for a host that has
// memory bytes of the kind what, and the note that explains it in errors.
func defaultBudget(memory uint64, what string) (uint64, string) {
	if memory == 0 {
		return 0, ""
	}
	return memory / budgetDen * budgetNum, fmt.Sprintf("the default, %d/%d of its %s of %d MiB", budgetNum, budgetDen, what, memory>>20)
}

// DefaultMemoryBudget is the Capacity.MemoryBytes a host takes when its
// Options leave it 0: 3/4 of the memory the process has, 0 when that cannot
// be read.
func DefaultMemoryBudget() uint64 {
	b, _ := defaultBudget(machine())
	return b
}
