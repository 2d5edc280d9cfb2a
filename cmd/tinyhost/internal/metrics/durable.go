package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tinyhost/tinyhost/host"
)

// DurableSource is what the durable messages' counts are read from at
// scrape time; *state.Engine is one.
type DurableSource interface {
	Counts() map[string]host.DurableCounts
}

var durableDesc = prometheus.NewDesc("tinyhost_durable_messages_total",
	"Messages sent at least once, by target module and event: published (stored, duplicates dropped not counted), delivered (handled and acknowledged), redelivered (a delivery after the first), dead_lettered.",
	[]string{"module", "event"}, nil)

// WithDurable makes m also export the counts of src; call it before m is
// registered.
func (m *Metrics) WithDurable(src DurableSource) *Metrics {
	m.durable = src
	return m
}

func (m *Metrics) collectDurable(ch chan<- prometheus.Metric) {
	if m.durable == nil {
		return
	}
	for module, c := range m.durable.Counts() {
		for _, e := range []struct {
			event string
			n     uint64
		}{{"published", c.Published}, {"delivered", c.Delivered}, {"redelivered", c.Redelivered}, {"dead_lettered", c.DeadLettered}} {
			ch <- prometheus.MustNewConstMetric(durableDesc, prometheus.CounterValue, float64(e.n), module, e.event)
		}
	}
}
