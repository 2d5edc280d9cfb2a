//go:build unix

package e2e

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the CPU time the process has used, user and system: what
// a benchmark costs, less sensitive than the time it takes to the other
// work of a busy machine.
func ProcessCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// ReportCPU reports the CPU time per iteration since cpu0, when measured.
func ReportCPU(b *testing.B, cpu0 time.Duration, ok bool) {
	if cpu1, ok1 := ProcessCPU(); ok && ok1 && b.N > 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
