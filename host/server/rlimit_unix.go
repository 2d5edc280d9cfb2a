//go:build unix

package server

import (
	"math"
	"syscall"
)

// descriptorLimit is the process's soft limit of open descriptors; 0 when
// it is unknown or unlimited.
func descriptorLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > math.MaxInt32 {
		return 0
	}
	return int(rl.Cur)
}
