package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tinyhost/tinyhost/abi"
)

func httpFailures() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tinyhost_http_failures_total",
		Help: "Outbound HTTP requests of modules that failed, by module and status (denied, too_large, timeout, unavailable).",
	}, []string{"module", "status"})
}

// HTTPFailed records a module's outbound HTTP request that failed with the
// status: a hook asked of the host library (host.HTTPObserver).
func (m *Metrics) HTTPFailed(module string, st abi.Status) {
	m.http.WithLabelValues(module, strings.ReplaceAll(st.String(), " ", "_")).Inc()
}
