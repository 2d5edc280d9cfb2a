// Package metrics exports a host's calls, pools and loads as Prometheus
// metrics.
//
// Calls, compilations and discarded instances are counted by the host
// library itself (Metrics is a host.Observer: CallDone, Compiled,
// InstanceDiscarded), so every guest call is counted once, whether it came
// over gRPC, from another module, a timer or a settings change. Pool and
// instance figures are read from the host's module table at scrape time.
// The kind labels are the contract's (api.Kind.Label).
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// Source is what the metrics read at scrape time; *host.Host is one.
type Source interface {
	Modules() []host.ModuleInfo
}

// Metrics is a prometheus.Collector of one host's metrics. Register it
// with a prometheus.Registerer.
type Metrics struct {
	src Source

	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	wait     *prometheus.HistogramVec
	compile  *prometheus.HistogramVec
	replaced *prometheus.CounterVec
	http     *prometheus.CounterVec // see http.go

	modules     *prometheus.Desc
	instances   *prometheus.Desc
	inUse       *prometheus.Desc
	idle        *prometheus.Desc
	waiting     *prometheus.Desc
	maxInst     *prometheus.Desc
	created     *prometheus.Desc
	discarded   *prometheus.Desc
	memoryBytes *prometheus.Desc

	durable DurableSource // nil: none (durable.go)
}

// latencyBuckets span a guest call from 50 µs to 25 s, by factors of 4.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 4, 10)

// New returns the metrics of src.
func New(src Source) *Metrics {
	return &Metrics{
		src: src,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tinyhost_calls_total",
			Help: "Calls into component ports, by module, component and result (ok or error).",
		}, []string{"module", "component", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tinyhost_call_errors_total",
			Help: "Failed calls by module, component and kind (trap, timeout, memory_limit, abi_violation, handler_error, too_large, denied, hop_limit, busy, not_found, unavailable, canceled, other).",
		}, []string{"module", "component", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tinyhost_call_duration_seconds",
			Help:    "Duration of calls into component ports, queueing for an instance included.",
			Buckets: latencyBuckets,
		}, []string{"module", "component"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tinyhost_pool_wait_seconds",
			Help:    "Time calls waited for a free instance, by module.",
			Buckets: latencyBuckets,
		}, []string{"module"}),
		compile: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tinyhost_module_compile_seconds",
			Help:    "Time to compile a module, by module and whether the compilation cache had it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"module", "cached"}),
		replaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tinyhost_instance_replacements_total",
			Help: "Instances discarded and replaced, by module and reason.",
		}, []string{"module", "reason"}),
		http: httpFailures(),

		modules:     prometheus.NewDesc("tinyhost_modules", "Loaded modules.", nil, nil),
		instances:   poolDesc("tinyhost_pool_instances", "Instances alive or being created."),
		inUse:       poolDesc("tinyhost_pool_in_use", "Instances running a call."),
		idle:        poolDesc("tinyhost_pool_idle", "Instances ready for a call."),
		waiting:     poolDesc("tinyhost_pool_waiting", "Calls queued for a free instance."),
		maxInst:     poolDesc("tinyhost_pool_max_instances", "The most instances the pool may have."),
		created:     poolDesc("tinyhost_pool_instances_created_total", "Instances created since the module's current version was loaded."),
		discarded:   poolDesc("tinyhost_pool_instances_discarded_total", "Instances discarded (trap, timeout, memory limit, ABI violation) since the module's current version was loaded."),
		memoryBytes: poolDesc("tinyhost_pool_memory_bytes", "Linear memory of the module's live instances."),
	}
}

func poolDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"module", "version"}, nil)
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	m.errors.Describe(ch)
	m.latency.Describe(ch)
	m.wait.Describe(ch)
	m.compile.Describe(ch)
	m.replaced.Describe(ch)
	m.http.Describe(ch)
	for _, d := range []*prometheus.Desc{m.modules, m.instances, m.inUse, m.idle, m.waiting, m.maxInst, m.created, m.discarded, m.memoryBytes} {
		ch <- d
	}
	if m.durable != nil {
		ch <- durableDesc
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.calls.Collect(ch)
	m.errors.Collect(ch)
	m.latency.Collect(ch)
	m.wait.Collect(ch)
	m.compile.Collect(ch)
	m.replaced.Collect(ch)
	m.http.Collect(ch)
	m.collectDurable(ch)
	mods := m.src.Modules()
	ch <- prometheus.MustNewConstMetric(m.modules, prometheus.GaugeValue, float64(len(mods)))
	for _, mod := range mods {
		p, labels := mod.Pool, []string{mod.Name, mod.Version}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		gauge(m.instances, float64(p.Instances))
		gauge(m.inUse, float64(p.InUse))
		gauge(m.idle, float64(p.Idle))
		gauge(m.waiting, float64(p.Waiting))
		gauge(m.maxInst, float64(mod.Limits.MaxInstances))
		gauge(m.memoryBytes, float64(p.MemoryBytes))
		ch <- prometheus.MustNewConstMetric(m.created, prometheus.CounterValue, float64(p.Created), labels...)
		ch <- prometheus.MustNewConstMetric(m.discarded, prometheus.CounterValue, float64(p.Discarded), labels...)
	}
}

func (m *Metrics) observe(module, component, kind string, d time.Duration) {
	// A call to a module that is not loaded must not mint label values: the
	// names come from the caller.
	if kind == "not_found" {
		module, component = "", ""
	}
	if kind == "" {
		m.calls.WithLabelValues(module, component, "ok").Inc()
	} else {
		m.calls.WithLabelValues(module, component, "error").Inc()
		m.errors.WithLabelValues(module, component, kind).Inc()
	}
	m.latency.WithLabelValues(module, component).Observe(d.Seconds())
}

// CallDone records a call into a guest as the host would report it: kind 0
// for success, the time it waited for an instance and the time it ran.
// It is the hook asked of the host library (Options.Observer).
func (m *Metrics) CallDone(module, component, _ string, kind api.Kind, wait, run time.Duration) {
	label := ""
	if kind != 0 {
		label = kind.Label()
	}
	m.observe(module, component, label, wait+run)
	if label != "not_found" {
		m.wait.WithLabelValues(module).Observe(wait.Seconds())
	}
}

// Compiled records the compilation of a module; cached says whether the
// compilation cache had it. A hook asked of the host library.
func (m *Metrics) Compiled(module string, d time.Duration, cached bool) {
	c := "false"
	if cached {
		c = "true"
	}
	m.compile.WithLabelValues(module, c).Observe(d.Seconds())
}

// InstanceDiscarded records an instance discarded for the kind of failure
// (trap, timeout, memory, ABI violation). A hook asked of the host library.
func (m *Metrics) InstanceDiscarded(module string, kind api.Kind) {
	m.replaced.WithLabelValues(module, kind.Label()).Inc()
}
