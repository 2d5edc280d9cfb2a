package host

import "math"

// ReapAll closes every idle instance of h beyond each module's
// MinInstances, as the watchdog does once they have been idle for their
// IdleTimeout.
func ReapAll(h *Host) { h.reapIdle(math.MaxInt64 / 2) }
