package host

import (
	"io/fs"
	"os"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
)

// TestMachineMemory reads the memory a host has from files shaped as
// Linux shows them: the least limit of its cgroup and the cgroup's
// ancestors, v2 or v1, when it is below physical memory, else physical
// memory; nothing when there is neither.
func TestMachineMemory(t *testing.T) {
	const meminfo = "MemTotal:       24684544 kB\nMemFree:        16678200 kB\n"
	const physical = 24684544 << 10
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  uint64
		what  string
	}{
		{"physical only", fstest.MapFS{"proc/meminfo": file(meminfo)}, physical, "physical memory"},
		{"v2 limit", fstest.MapFS{
			"proc/meminfo":     file(meminfo),
			"proc/self/cgroup": file("0::/kubepods/pod1/c1\n"),
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": file("536870912\n"),
		}, 512 << 20, "cgroup memory limit"},
		{"v2 limit of an ancestor", fstest.MapFS{
			"proc/meminfo":     file(meminfo),
			"proc/self/cgroup": file("0::/kubepods/pod1/c1\n"),
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": file("max\n"),
			"sys/fs/cgroup/kubepods/pod1/memory.max":    file("1073741824\n"),
		}, 1 << 30, "cgroup memory limit"},
		{"v2 in a container: its own cgroup is the root", fstest.MapFS{
			"proc/meminfo":             file(meminfo),
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("268435456\n"),
		}, 256 << 20, "cgroup memory limit"},
		{"v2 max", fstest.MapFS{
			"proc/meminfo":             file(meminfo),
			"proc/self/cgroup":         file("0::/user.slice\n"),
			"sys/fs/cgroup/memory.max": file("max\n"),
		}, physical, "physical memory"},
		{"v1 limit", fstest.MapFS{
			"proc/meminfo":     file(meminfo),
			"proc/self/cgroup": file("12:pids:/docker/abc\n9:cpu,memory:/docker/abc\n"),
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": file("2147483648\n"),
		}, 2 << 30, "cgroup memory limit"},
		{"v1 unlimited", fstest.MapFS{
			"proc/meminfo":     file(meminfo),
			"proc/self/cgroup": file("9:memory:/\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n"),
		}, physical, "physical memory"},
		{"a limit above physical memory", fstest.MapFS{
			"proc/meminfo":             file(meminfo),
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("107374182400\n"),
		}, physical, "physical memory"},
		{"nothing", fstest.MapFS{}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, what := machineMemory(tc.files)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.what, what)
		})
	}
}

// TestDefaultBudget: a host with no Capacity.MemoryBytes takes 3/4 of the
// memory it has, and says so in the refusal of a load past it.
func TestDefaultBudget(t *testing.T) {
	restore := machine
	t.Cleanup(func() { machine = restore })
	machine = func() (uint64, string) { return 4 << 30, "cgroup memory limit" }
	var o Options
	o.fill()
	assert.Equal(t, uint64(3<<30), o.Capacity.MemoryBytes)
	assert.Equal(t, "the default, 3/4 of its cgroup memory limit of 4096 MiB", o.budgetNote)

	machine = func() (uint64, string) { return 0, "" }
	o = Options{}
	o.fill()
	assert.Zero(t, o.Capacity.MemoryBytes, "a host that cannot tell bounds nothing")

	o = Options{Capacity: Capacity{MemoryBytes: 1 << 30}}
	o.fill()
	assert.Equal(t, uint64(1<<30), o.Capacity.MemoryBytes, "an explicit budget stands")
	assert.Equal(t, "Capacity.MemoryBytes", o.budgetNote)

	// On this machine, the figures are the ones the machine has.
	mem, _ := machineMemory(osRoot())
	t.Logf("this machine: %d MiB, a default budget of %d MiB", mem>>20, mem/4*3>>20)
}

func osRoot() fs.FS { return os.DirFS("/") }
