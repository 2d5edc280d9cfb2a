//go:build !unix

package e2e

import (
	"testing"
	"time"
)

// ProcessCPU is not measured here.
func ProcessCPU() (time.Duration, bool) { return 0, false }

// ReportCPU reports nothing: ProcessCPU measures nothing.
func ReportCPU(*testing.B, time.Duration, bool) {}
