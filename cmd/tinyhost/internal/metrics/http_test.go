package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/metrics"
	"github.com/tinyhost/tinyhost/host"
)

// The metrics are the host's HTTPObserver.
var _ host.HTTPObserver = (*metrics.Metrics)(nil)

func TestHTTPFailures(t *testing.T) {
	m := metrics.New(modules{})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	m.HTTPFailed("fetcher", abi.StatusDenied)
	m.HTTPFailed("fetcher", abi.StatusDenied)
	m.HTTPFailed("fetcher", abi.StatusTooLarge)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tinyhost_http_failures_total Outbound HTTP requests of modules that failed, by module and status (denied, too_large, timeout, unavailable).
# TYPE tinyhost_http_failures_total counter
tinyhost_http_failures_total{module="fetcher",status="denied"} 2
tinyhost_http_failures_total{module="fetcher",status="too_large"} 1
`), "tinyhost_http_failures_total"))
}
