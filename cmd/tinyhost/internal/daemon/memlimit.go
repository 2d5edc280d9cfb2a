package daemon

import (
	"runtime/debug"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/host"
)

// memoryBudget is the memory the host may use: --max-memory-bytes, else
// the host's default (3/4 of the memory the process has), 0 for none.
func memoryBudget(cfg Config) uint64 {
	if cfg.MaxMemoryBytes != 0 {
		return cfg.MaxMemoryBytes
	}
	return host.DefaultMemoryBudget()
}

// setGoMemoryLimit makes the budget the Go runtime's soft memory limit
// (GOMEMLIMIT), unless the environment sets GOMEMLIMIT (then the runtime
// read it already) or there is no budget. Near the limit the collector
// runs sooner and the runtime returns freed memory to the system at once,
// so that what a burst of calls left behind does not stay resident.
// Modules' linear memory lives outside the Go heap and is bounded by the
// budget itself.
func setGoMemoryLimit(budget uint64, fromEnv bool, log hclog.Logger) {
	switch {
	case fromEnv:
		log.Debug("Go memory limit from GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
	case budget == 0 || budget == host.NoMemoryBound:
		return
	default:
		limit := int64(min(budget, 1<<62))
		debug.SetMemoryLimit(limit)
		log.Debug("Go memory limit set from the memory budget", "bytes", limit)
	}
}
