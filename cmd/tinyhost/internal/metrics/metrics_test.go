package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/metrics"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

type modules []host.ModuleInfo

func (m modules) Modules() []host.ModuleInfo { return m }

func TestMetrics(t *testing.T) {
	src := modules{{
		Name: "hello", Version: "0.1.0",
		Limits: api.Limits{MaxInstances: 4},
		Pool:   host.PoolStats{Instances: 2, Idle: 1, InUse: 1, Waiting: 3, Created: 5, Discarded: 3, MemoryBytes: 1 << 20},
	}}
	m := metrics.New(src)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))

	m.CallDone("hello", "greeter", "in", 0, time.Millisecond, time.Millisecond)
	m.CallDone("hello", "greeter", "in", api.KindTrap, 0, time.Millisecond)
	m.CallDone("x1", "y", "in", api.KindNotFound, 0, 0)
	m.CallDone("x2", "y", "in", api.KindNotFound, 0, 0)
	m.CallDone("hello", "greeter", "in", api.KindCanceled, 0, 0)
	m.CallDone("hello", "greeter", "in", 0, time.Millisecond, time.Millisecond)
	m.Compiled("hello", 500*time.Millisecond, false)
	m.InstanceDiscarded("hello", api.KindMemory)

	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tinyhost_call_errors_total Failed calls by module, component and kind (trap, timeout, memory_limit, abi_violation, handler_error, too_large, denied, hop_limit, busy, not_found, unavailable, canceled, other).
# TYPE tinyhost_call_errors_total counter
tinyhost_call_errors_total{component="",kind="not_found",module=""} 2
tinyhost_call_errors_total{component="greeter",kind="canceled",module="hello"} 1
tinyhost_call_errors_total{component="greeter",kind="trap",module="hello"} 1
# HELP tinyhost_calls_total Calls into component ports, by module, component and result (ok or error).
# TYPE tinyhost_calls_total counter
tinyhost_calls_total{component="",module="",result="error"} 2
tinyhost_calls_total{component="greeter",module="hello",result="error"} 2
tinyhost_calls_total{component="greeter",module="hello",result="ok"} 2
# HELP tinyhost_instance_replacements_total Instances discarded and replaced, by module and reason.
# TYPE tinyhost_instance_replacements_total counter
tinyhost_instance_replacements_total{module="hello",reason="memory_limit"} 1
# HELP tinyhost_modules Loaded modules.
# TYPE tinyhost_modules gauge
tinyhost_modules 1
# HELP tinyhost_pool_in_use Instances running a call.
# TYPE tinyhost_pool_in_use gauge
tinyhost_pool_in_use{module="hello",version="0.1.0"} 1
# HELP tinyhost_pool_instances_discarded_total Instances discarded (trap, timeout, memory limit, ABI violation) since the module's current version was loaded.
# TYPE tinyhost_pool_instances_discarded_total counter
tinyhost_pool_instances_discarded_total{module="hello",version="0.1.0"} 3
# HELP tinyhost_pool_waiting Calls queued for a free instance.
# TYPE tinyhost_pool_waiting gauge
tinyhost_pool_waiting{module="hello",version="0.1.0"} 3
# HELP tinyhost_pool_max_instances The most instances the pool may have.
# TYPE tinyhost_pool_max_instances gauge
tinyhost_pool_max_instances{module="hello",version="0.1.0"} 4
`), "tinyhost_calls_total", "tinyhost_call_errors_total", "tinyhost_instance_replacements_total", "tinyhost_modules",
		"tinyhost_pool_in_use", "tinyhost_pool_waiting", "tinyhost_pool_instances_discarded_total", "tinyhost_pool_max_instances")
	assert.NoError(t, err)

	assert.Equal(t, 1, testutil.CollectAndCount(m, "tinyhost_module_compile_seconds"))
	assert.Equal(t, 1, testutil.CollectAndCount(m, "tinyhost_pool_wait_seconds"))
	assert.Equal(t, 2, testutil.CollectAndCount(m, "tinyhost_call_duration_seconds"), "hello/greeter and the unlabelled not-found calls")
}
