package host_test

import (
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
