//go:build !unix

package host_test

import (
	"testing"
	"time"
)

// processCPU is not measured here.
func processCPU() (time.Duration, bool) { return 0, false }

// reportCPU reports nothing: processCPU measures nothing.
func reportCPU(*testing.B, time.Duration, bool) {}
