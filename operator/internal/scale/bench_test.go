package scale

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
	"github.com/tinyhost/tinyhost/operator/kubetest"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// The cluster of BenchmarkScale: farms processes of hostsPerFarm hosts,
// and modules TinyModules of one replica each.
const (
	farms        = 10
	hostsPerFarm = 10
	modules      = 1000
)

// BenchmarkScale runs one round whatever b.N (`make bench` runs it with
// -benchtime=1x): a hundred hosts, registered by hand (TinyHosts without
// Leases: a hundred Lease renewals a second swamp an apiserver that shares
// two cores with everything else, and a killed host refuses its probes
// at once, so its probes find it as soon), the operator's binary with its
// defaults, and
//
//   - s/apply, modules/s: a thousand TinyModules of the tiny module
//     (one 64 KiB page, no warm instance) created at once, to every one
//     Ready;
//   - requests/module, writes/module: the operator's apiserver requests
//     meanwhile (its own rest_client_requests_total), per module;
//   - s/ready-elsewhere, modules-moved: the process of ten hosts killed
//     (SIGKILL: their gRPC servers gone at once, nothing deregistered), to
//     every module those hosts ran Ready on another host; s/placed-elsewhere,
//     to every one of them placed on another host (the loads still to
//     come);
//   - live-host-flaps: how often a host that was not killed was taken
//     for NotReady (its probes failed three times in a row) over the run;
//   - MiB-rss: the operator's peak resident memory (VmHWM) over the run.
//
// It logs the CPU time each kind of process took while applying and while
// failing over, and the machine's, which say what bounds the figures.
//
// With SCALE_PPROF=host:port in its environment, the operator serves Go's
// /debug/pprof there, to profile it while the benchmark runs.
func BenchmarkScale(b *testing.B) {
	env := kubetest.Start(b)
	reg := testbed.StartRegistry(b)
	wasm, err := os.ReadFile(filepath.Join(kubetest.Root(), "cmd", "tinyhost", "internal", "hostfarm", "testdata", "tiny.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	tiny := reg.PushBytes(b, wasm, "tinyhost/tiny:1.0.0")
	farmBin := e2e.Binary(b, "cmd/tinyhost/internal/hostfarm")
	opBin := e2e.Binary(b, "cmd/tinyhost-operator")

	cacheDir := b.TempDir()
	procs := make([]*process, farms)
	for i := range farms {
		procs[i] = start(b, fmt.Sprintf("farm %d", i), nil, farmBin,
			"--hosts", strconv.Itoa(hostsPerFarm), "--prefix", farmPrefix(i), "--",
			"--cache-dir", cacheDir, "--artifacts-plain-http", reg.Host, "--log-level", "warn")
		register(b, env.Client, procs[i])
	}
	metricsAddr := freeAddr(b)
	op := e2e.StartOperator(b, opBin, env.UserKubeconfig(b, "operator", "system:masters"),
		"--leader-elect=false", "--host-lease-namespace=default",
		"--metrics-bind-address="+metricsAddr, "--metrics-secure=false", "--pprof-bind-address="+os.Getenv("SCALE_PPROF"))

	ctx := b.Context()
	c := watched(b, env)
	hostsReady(ctx, b, c)

	before := requests(b, metricsAddr)
	kinds := writesByKind(ctx, b, env)
	b.ResetTimer()
	cpu := cpuTimes(b)
	begin := time.Now()
	createModules(b, env.Client, tiny.Ref)
	poll(b, 10*time.Minute, 250*time.Millisecond, "every module Ready", func() error {
		return allReady(ctx, c, nil)
	})
	applied := time.Since(begin)
	b.Logf("CPU seconds while applying, by process: %s", cpuSince(b, cpu))
	after := requests(b, metricsAddr)
	b.ReportMetric(applied.Seconds(), "s/apply")
	b.ReportMetric(modules/applied.Seconds(), "modules/s")
	b.ReportMetric(float64(after.all-before.all)/modules, "requests/module")
	b.ReportMetric(float64(after.writes-before.writes)/modules, "writes/module")
	b.Logf("apiserver writes per module while applying, by kind (the benchmark's own creates included): %s", perModule(kinds, writesByKind(ctx, b, env), modules))

	lost := modulesOn(ctx, b, c, farmPrefix(0))
	kinds = writesByKind(ctx, b, env)
	b.Logf("applied; the operator's queues: %s", queues(b, metricsAddr))
	procs[0].kill(b)
	killed := time.Now()
	cpu = cpuTimes(b)
	replaced := movedOff(ctx, b, c, lost, killed, metricsAddr)
	b.ReportMetric(time.Since(killed).Seconds(), "s/ready-elsewhere")
	b.ReportMetric(replaced.Seconds(), "s/placed-elsewhere")
	b.Logf("CPU seconds while failing over, by process: %s", cpuSince(b, cpu))
	b.Logf("apiserver writes per moved module while failing over, by kind: %s", perModule(kinds, writesByKind(ctx, b, env), len(lost)))
	b.ReportMetric(float64(len(lost)), "modules-moved")
	b.ReportMetric(float64(flaps(ctx, b, env.Client, farmPrefix(0))), "live-host-flaps")
	b.StopTimer()
	b.ReportMetric(float64(peakRSS(b, op.PID()))/(1<<20), "MiB-rss")
}

// hostsReady waits until every host of the farms is Ready.
func hostsReady(ctx context.Context, b *testing.B, c client.Reader) {
	poll(b, 3*time.Minute, 500*time.Millisecond, "every host Ready", func() error {
		var hosts v1alpha1.TinyHostList
		if err := c.List(ctx, &hosts); err != nil {
			return err
		}
		ready := 0
		for i := range hosts.Items {
			if meta.IsStatusConditionTrue(hosts.Items[i].Status.Conditions, v1alpha1.ConditionHostReady) {
				ready++
			}
		}
		if ready != farms*hostsPerFarm {
			return fmt.Errorf("%d/%d hosts Ready", ready, farms*hostsPerFarm)
		}
		return nil
	})

}

// movedOff waits until every lost module is Ready on a host of another
// farm than the killed one, logging the operator's queues every 5 s. It
// returns how long after the kill every lost module was first placed on
// such a host (in any phase): the part of the failover before the loads.
func movedOff(ctx context.Context, b *testing.B, c client.Reader, lost map[string]bool, killed time.Time, metricsAddr string) time.Duration {
	last := killed
	var placed time.Duration
	poll(b, 5*time.Minute, 100*time.Millisecond, "the modules of the killed hosts Ready elsewhere", func() error {
		checked, unplaced := 0, 0
		err := allReady(ctx, c, func(m *v1alpha1.TinyModule) error {
			if !lost[m.Name] {
				return nil
			}
			checked++
			elsewhere := false
			for _, p := range m.Status.Placements {
				if strings.HasPrefix(p.Host, farmPrefix(0)) {
					continue
				}
				elsewhere = true
				if p.Phase == v1alpha1.PhaseReady {
					return nil
				}
			}
			if !elsewhere {
				unplaced++
			}
			return fmt.Errorf("not Ready on a host alive")
		})
		if checked == len(lost) && unplaced == 0 && placed == 0 {
			placed = time.Since(killed)
		}
		if err != nil && time.Since(last) >= 5*time.Second {
			last = time.Now()
			b.Logf("%v after the kill: %v; queues: %s", time.Since(killed).Round(time.Second), err, queues(b, metricsAddr))
		}
		return err
	})
	if placed == 0 {
		placed = time.Since(killed)
	}
	return placed
}

// register creates a TinyHost for each host the farm p says it runs,
// "<name> <address>" a line on its standard output.
func register(b *testing.B, c client.Client, p *process) {
	for range hostsPerFarm {
		var line string
		select {
		case line = <-p.lines:
		case <-p.exited:
			b.Fatalf("%s exited:\n%s", p.name, p.log.String())
		case <-time.After(time.Minute):
			b.Fatalf("%s named no host within a minute", p.name)
		}
		name, addr, ok := strings.Cut(line, " ")
		if !ok {
			b.Fatalf("%s: %q is not <name> <address>", p.name, line)
		}
		h := &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TinyHostSpec{Address: addr}}
		if err := c.Create(b.Context(), h); err != nil {
			b.Fatal(err)
		}
	}
}

// watched is a reader of TinyHosts and TinyModules from a cache that
// watches them: polling it costs the apiserver nothing, where listing a
// thousand modules a few times a second would load the apiserver being
// measured.
func watched(b *testing.B, env *kubetest.Env) client.Reader {
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	for _, obj := range []client.Object{&v1alpha1.TinyHost{}, &v1alpha1.TinyModule{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan struct{})
	b.Cleanup(func() { cancel(); <-done })
	go func() { defer close(done); _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the cache did not sync")
	}
	return c
}

func farmPrefix(i int) string { return fmt.Sprintf("farm-%d-", i) }

// createModules creates the TinyModules, several at a time, as a client
// applying a large manifest would.
func createModules(b *testing.B, c client.Client, image string) {
	var wg sync.WaitGroup
	errs := make(chan error, modules)
	sem := make(chan struct{}, 16)
	for i := range modules {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			m := &v1alpha1.TinyModule{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tiny-%d", i), Namespace: "default"},
				Spec: v1alpha1.TinyModuleSpec{Image: image, Replicas: ptr[int32](1), Limits: &v1alpha1.Limits{
					MemoryPages: ptr[int32](1), MinInstances: ptr[int32](0), MaxInstances: ptr[int32](1),
				}},
			}
			if err := c.Create(b.Context(), m); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// allReady says which modules are not Ready (and, with check, not as
// check wants them), if any.
func allReady(ctx context.Context, c client.Reader, check func(*v1alpha1.TinyModule) error) error {
	var list v1alpha1.TinyModuleList
	if err := c.List(ctx, &list, client.InNamespace("default"), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	if len(list.Items) != modules {
		return fmt.Errorf("%d/%d modules", len(list.Items), modules)
	}
	var notReady int
	var first error
	for i := range list.Items {
		m := &list.Items[i]
		var err error
		if check != nil {
			err = check(m)
		}
		if err == nil {
			cond := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionReady)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != m.Generation {
				err = fmt.Errorf("state %q", m.Status.State)
			}
		}
		if err != nil {
			notReady++
			if first == nil {
				first = fmt.Errorf("%s: %w", m.Name, err)
			}
		}
	}
	if notReady > 0 {
		return fmt.Errorf("%d/%d modules not Ready, e.g. %w", notReady, modules, first)
	}
	return nil
}

// modulesOn is the modules Ready on the hosts whose names start with
// prefix.
func modulesOn(ctx context.Context, b *testing.B, c client.Reader, prefix string) map[string]bool {
	var list v1alpha1.TinyModuleList
	if err := c.List(ctx, &list, client.InNamespace("default")); err != nil {
		b.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range list.Items {
		for _, p := range m.Status.Placements {
			if p.Phase == v1alpha1.PhaseReady && strings.HasPrefix(p.Host, prefix) {
				out[m.Name] = true
			}
		}
	}
	return out
}

// queues are the operator's work queues' depths, for the log.
func queues(b *testing.B, addr string) string {
	var out []string
	scrape(b, addr, func(line string) {
		if strings.HasPrefix(line, "workqueue_depth{") {
			out = append(out, line)
		}
	})
	return strings.Join(out, ", ")
}

// flaps counts the Events that took a host for NotReady, but for the
// hosts whose names start with killed.
func flaps(ctx context.Context, b *testing.B, c client.Client, killed string) int {
	var list eventsv1.EventList
	if err := c.List(ctx, &list); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason == "HostNotReady" && e.Regarding.Kind == "TinyHost" && !strings.HasPrefix(e.Regarding.Name, killed) {
			n++
		}
	}
	return n
}

// writesByKind are the apiserver's writes so far (apiserver_request_total,
// every client's), by verb, resource and subresource.
func writesByKind(ctx context.Context, b *testing.B, env *kubetest.Env) map[string]float64 {
	rc, err := rest.RESTClientFor(restConfig(env))
	if err != nil {
		b.Fatal(err)
	}
	body, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[strings.IndexByte(line, '{')+1:strings.IndexByte(line, '}')], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		switch labels["verb"] {
		case "GET", "LIST", "WATCH":
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			b.Fatalf("metrics: %q: %v", line, err)
		}
		k := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			k += "/" + sub
		}
		out[k] += v
	}
	return out
}

func restConfig(env *kubetest.Env) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.GroupVersion = &schema.GroupVersion{}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// perModule is what grew from before to after, per module of n, largest
// first.
func perModule(before, after map[string]float64, n int) string {
	keys := slices.Collect(maps.Keys(after))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(after[b]-before[b], after[a]-before[a]) })
	var out []string
	for _, k := range keys {
		if d := after[k] - before[k]; d > 0 {
			out = append(out, fmt.Sprintf("%s %.2f", k, d/float64(n)))
		}
	}
	return strings.Join(out, ", ")
}

// counts are the operator's apiserver requests so far.
type counts struct{ all, writes int64 }

// requests reads the operator's rest_client_requests_total, by method.
func requests(b *testing.B, addr string) counts {
	var n counts
	scrape(b, addr, func(line string) {
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			return
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			b.Fatalf("metrics: %q: %v", line, err)
		}
		n.all += int64(v)
		if !strings.Contains(line, `method="GET"`) {
			n.writes += int64(v)
		}
	})
	return n
}

// scrape calls f with each line of the operator's metrics.
func scrape(b *testing.B, addr string, f func(line string)) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f(sc.Text())
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
}

// process is a binary the benchmark started.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    *e2e.LogBuffer // its standard error
	lines  chan string    // its standard output, by line
	exited chan struct{}
}

// start starts bin with args and more environment, and stops it (SIGTERM,
// then SIGKILL after 30 s) when the benchmark ends.
func start(b *testing.B, name string, env []string, bin string, args ...string) *process {
	b.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), log: &e2e.LogBuffer{}, lines: make(chan string, 1024), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.log
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody reads them
			}
		}
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	b.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}
		if b.Failed() {
			b.Logf("%s log (tail):\n%s", name, tail(p.log.String(), 64<<10))
		}
	})
	return p
}

// kill kills the process (SIGKILL) and waits until it is gone.
func (p *process) kill(b *testing.B) {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	<-p.exited
}

// peakRSS is the peak resident set of the process pid, in bytes (VmHWM).
func peakRSS(b *testing.B, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// poll is testify's EventuallyWithT for a cond that says why it does not
// hold yet: it calls cond every interval until it returns nil, for at most
// d, and fails with its last error.
func poll(b *testing.B, d, interval time.Duration, what string, cond func() error) {
	b.Helper()
	require.EventuallyWithT(b, func(c *assert.CollectT) { assert.NoError(c, cond()) }, d, interval, what)
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func ptr[T any](v T) *T { return &v }
