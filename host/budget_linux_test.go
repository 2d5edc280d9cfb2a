package host_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host"
)

// physicalMemory is the machine's memory, as the kernel reports it.
func physicalMemory(t *testing.T) uint64 {
	var si syscall.Sysinfo_t
	require.NoError(t, syscall.Sysinfo(&si))
	return uint64(si.Totalram) * uint64(si.Unit)
}

// TestDefaultMemoryBudget: a host given no budget has one, below the
// memory of the machine.
func TestDefaultMemoryBudget(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	c := h.Capacity()
	assert.Positive(t, c.MemoryBytes)
	assert.Less(t, c.MemoryBytes, uint64(physicalMemory(t)))
}

// residentMemory is the process's resident memory (VmRSS).
func residentMemory(t testing.TB) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			require.NoError(t, err)
			return n << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
