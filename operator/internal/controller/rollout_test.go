package controller

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// callRate is the calls a second TestRolloutAndMove's caller makes: the
// acceptance's 500 and some, paced by 24 workers.
const callRate = 700

// calls is a caller that calls a module through another module at a steady
// rate and tallies the outcomes.
type calls struct {
	mu      sync.Mutex
	ok      int
	failed  int
	errs    []string // the first few
	replies map[string]int
	stop    chan struct{}
	done    sync.WaitGroup
	start   time.Time
	end     time.Time
}

// startCalls has workers call relay/relay/call on host c, which calls
// target, callRate times a second in all, until stop.
func startCalls(ctx context.Context, c hostv1.HostServiceClient, target string) *calls {
	k := &calls{replies: map[string]int{}, stop: make(chan struct{}), start: time.Now()}
	const workers = 24
	req := &hostv1.InvokeRequest{Module: "relay", Component: "relay", Port: "call",
		Payload: []byte(`{"to":"` + target + `","payload":{}}`)}
	for range workers {
		k.done.Add(1)
		go func() {
			defer k.done.Done()
			tick := time.NewTicker(time.Second * workers / callRate)
			defer tick.Stop()
			for {
				select {
				case <-k.stop:
					return
				case <-tick.C:
				}
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				resp, err := c.Invoke(ctx, req)
				cancel()
				k.record(resp, err)
			}
		}()
	}
	return k
}

func (k *calls) record(resp *hostv1.InvokeResponse, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.failed++
		if len(k.errs) < 5 {
			k.errs = append(k.errs, err.Error())
		}
		return
	}
	k.ok++
	k.replies[string(resp.GetPayload())]++
}

// succeeded is the number of calls that succeeded so far.
func (k *calls) succeeded() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ok
}

// more waits until n more calls have succeeded.
func (k *calls) more(t *testing.T, n int) {
	t.Helper()
	from := k.succeeded()
	eventually(t, time.Minute, fmt.Sprintf("%d more calls", n), func() error {
		if got := k.succeeded() - from; got < n {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
}

func (k *calls) halt() {
	close(k.stop)
	k.done.Wait()
	k.end = time.Now()
}

// timeline is what happened when, for the log.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (tl *timeline) add(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, fmt.Sprintf("%7.3fs  ", time.Since(tl.start).Seconds())+fmt.Sprintf(format, args...))
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}

// statusLog watches a TinyModule and keeps each status it had.
type statusLog struct {
	mu  sync.Mutex
	all []v1alpha1.TinyModuleStatus
}

func watchStatus(t *testing.T, b *bed, ns, name string, tl *timeline) *statusLog {
	t.Helper()
	wc, err := client.NewWithWatch(b.env.Config, client.Options{Scheme: b.c.Scheme()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &v1alpha1.TinyModuleList{}, client.InNamespace(ns))
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	sl := &statusLog{}
	go func() {
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1alpha1.TinyModule)
			if !ok || m.Name != name {
				continue
			}
			sl.mu.Lock()
			last := len(sl.all) > 0 && sameShape(sl.all[len(sl.all)-1], m.Status)
			sl.all = append(sl.all, m.Status)
			sl.mu.Unlock()
			if !last {
				tl.add("status: %s", shape(m.Status))
			}
		}
	}()
	return sl
}

// shape is a status in one line: its counts and its placements' phases.
func shape(st v1alpha1.TinyModuleStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ready=%d updated=%d state=%s", st.ReadyReplicas, st.UpdatedReplicas, st.State)
	for _, p := range st.Placements {
		fmt.Fprintf(&b, " %s=%s", p.Host, p.Phase)
		if p.Message == msgUpdating {
			b.WriteString("(updating)")
		}
	}
	return b.String()
}

func sameShape(a, b v1alpha1.TinyModuleStatus) bool { return shape(a) == shape(b) }

func (sl *statusLog) statuses() []v1alpha1.TinyModuleStatus {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return slices.Clone(sl.all)
}

// rolloutBed is TestRolloutAndMove's bed: a caller host with relay, and
// three server hosts of which two run versioned 1.0.0, which the caller's
// host routes to. It returns 2.0.0's artifact and the caller host's client.
func rolloutBed(t *testing.T) (*bed, testbed.Module, hostv1.HostServiceClient) {
	t.Helper()
	return rolloutBedWith(t, bedOptions{})
}

func rolloutBedWith(t *testing.T, o bedOptions) (*bed, testbed.Module, hostv1.HostServiceClient) {
	t.Helper()
	server := map[string]string{"role": "server"}
	b := newBedWith(t, o, hostSpec{name: "caller", labels: map[string]string{"role": "caller"}},
		hostSpec{name: "s1", labels: server}, hostSpec{name: "s2", labels: server}, hostSpec{name: "s3", labels: server})
	read := func(path string) []byte {
		bs, err := os.ReadFile(path)
		require.NoError(t, err)
		return bs
	}
	const pkg = "internal/e2e/testdata/versioned"
	relay := b.reg.Push(t, "internal/e2e/testdata/relay", "tinyhost/relay:1.0.0")
	v1 := b.reg.PushBytes(t, read(e2e.WasmVersion(t, pkg, "1.0.0")), "tinyhost/versioned:1.0.0")
	v2 := b.reg.PushBytes(t, read(e2e.WasmVersion(t, pkg, "2.0.0")), "tinyhost/versioned:2.0.0")
	require.NotEqual(t, v1.Digest, v2.Digest)

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "relay"}, Spec: v1alpha1.TinyModuleSpec{
		Image: relay.Ref, HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "caller"}},
		Capabilities: []v1alpha1.Capability{"messaging"}}})
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "versioned"}, Spec: v1alpha1.TinyModuleSpec{
		Image: v1.Ref, Replicas: replicas(2), HostSelector: &metav1.LabelSelector{MatchLabels: server}}})
	b.ready(t, "default", "relay", 2*time.Minute)
	m := b.ready(t, "default", "versioned", 2*time.Minute)
	require.Len(t, readyOn(m), 2)
	caller := b.hosts["caller"].Client
	eventually(t, time.Minute, "the caller's host to route to versioned", func() error {
		_, err := caller.Invoke(t.Context(), &hostv1.InvokeRequest{Module: "relay", Component: "relay", Port: "call",
			Payload: []byte(`{"to":"versioned/version/in","payload":{}}`)})
		return err
	})
	return b, v2, caller
}

// TestRolloutAndMove is the acceptance of rollouts and make-before-break:
// a caller on one host calls a module with two replicas on two other
// hosts at a steady rate while the module is upgraded to a new artifact,
// then while one replica moves off a host that is cordoned. No call fails,
// every reply is from the old or the new build, the upgrade goes one
// replica at a time, the module never has fewer than one Ready replica,
// and the replica leaving the cordoned host drains before it unloads.
func TestRolloutAndMove(t *testing.T) {
	b, v2, caller := rolloutBed(t)
	tl := &timeline{start: time.Now()}
	statuses := watchStatus(t, b, "default", "versioned", tl)

	k := startCalls(t.Context(), caller, "versioned/version/in")
	tl.add("calls started, %d a second", callRate)
	k.more(t, callRate)

	// (a) The upgrade: another artifact, other bytes.
	var m *v1alpha1.TinyModule
	b.update(t, "default", "versioned", func(m *v1alpha1.TinyModule) { m.Spec.Image = v2.Ref })
	tl.add("upgrade applied: image %s", v2.Ref)
	eventually(t, 2*time.Minute, "both replicas on 2.0.0", func() error {
		m = b.module(t, "default", "versioned")
		if m.Status.ObservedGeneration != m.Generation || m.Status.UpdatedReplicas != 2 || m.Status.State != v1alpha1.StateReady {
			return fmt.Errorf("status %s", brief(m))
		}
		return nil
	})
	tl.add("upgraded: %s", shape(m.Status))
	k.more(t, callRate)

	// (b) The move: cordon one replica's host.
	from := readyOn(m)[0]
	b.updateHost(t, from, func(h *v1alpha1.TinyHost) { h.Spec.Unschedulable = true })
	tl.add("host %s cordoned", from)
	m = movedOff(t, b, from)
	tl.add("moved: %s; unloaded from %s", shape(m.Status), from)
	k.more(t, callRate)
	k.halt()
	tl.add("calls stopped")

	t.Logf("timeline:\n%s", tl)
	checkRollout(t, k, statuses.statuses(), from)
}

// checkRollout checks TestRolloutAndMove's calls and the statuses the
// module went through, from being the host cordoned.
func checkRollout(t *testing.T, k *calls, statuses []v1alpha1.TinyModuleStatus, from string) {
	t.Helper()
	took := k.end.Sub(k.start)
	t.Logf("%d calls in %v: %.0f calls/s, %d failed; replies %v", k.ok+k.failed, took.Round(time.Millisecond),
		float64(k.ok+k.failed)/took.Seconds(), k.failed, k.replies)
	assert.Zero(t, k.failed, "failed calls, the first: %q", k.errs)
	for reply := range k.replies {
		assert.Contains(t, []string{"1.0.0", "2.0.0"}, reply, "a reply from neither build")
	}
	assert.Positive(t, k.replies["1.0.0"], "replies from the old build")
	assert.Positive(t, k.replies["2.0.0"], "replies from the new build")

	var oneUpdated, drained, unloading bool
	for _, st := range statuses {
		assert.GreaterOrEqual(t, st.ReadyReplicas, int32(1), "a status without a Ready replica: %s", shape(st))
		oneUpdated = oneUpdated || (st.UpdatedReplicas == 1 && st.ReadyReplicas == 2)
		for _, p := range st.Placements {
			if p.Host == from && p.Phase == v1alpha1.PhaseDraining {
				drained = true
			}
			if p.Host == from && p.Phase == v1alpha1.PhaseUnloading {
				unloading = true
			}
		}
	}
	assert.True(t, oneUpdated, "the upgrade went one replica at a time (one updated, two Ready)")
	assert.True(t, drained, "the replica on %s was Draining while its replacement loaded", from)
	assert.True(t, unloading, "the replica on %s was Unloading before it was gone", from)
}

// TestEveryHost: a module in placement mode EveryHost runs on every host
// its selector matches, follows a host that joins, and leaves a host whose
// labels stop matching.
func TestEveryHost(t *testing.T) {
	edge := map[string]string{"tier": "edge"}
	b := newBed(t, hostSpec{name: "e1", labels: edge}, hostSpec{name: "e2", labels: edge},
		hostSpec{name: "c1", labels: map[string]string{"tier": "core"}})
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "hello"}, Spec: v1alpha1.TinyModuleSpec{
		Image: b.hello.Ref, Placement: &v1alpha1.PlacementPolicy{Mode: v1alpha1.PlacementEveryHost},
		HostSelector: &metav1.LabelSelector{MatchLabels: edge}}})
	on := func(want ...string) func() error {
		return func() error {
			m := b.module(t, "default", "hello")
			loaded := b.loadedOn(t, "hello")
			got := make([]string, 0, len(loaded))
			for h := range loaded {
				got = append(got, h)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) || !slices.Equal(readyOn(m), want) || m.Status.State != v1alpha1.StateReady ||
				m.Status.ReadyReplicas != int32(len(want)) {
				return fmt.Errorf("loaded on %v; status %s", got, brief(m))
			}
			return nil
		}
	}
	eventually(t, 2*time.Minute, "hello on e1 and e2", on("e1", "e2"))

	h := testbed.StartHost(t, "e3", "--artifacts-plain-http", b.reg.Host)
	b.hosts["e3"] = h
	testbed.Register(t, b.c, "e3", h.Addr, edge)
	eventually(t, 2*time.Minute, "hello on e3, which joined", on("e1", "e2", "e3"))

	b.updateHost(t, "e2", func(h *v1alpha1.TinyHost) { h.Labels["tier"] = "core" })
	eventually(t, 2*time.Minute, "hello off e2, no longer selected", on("e1", "e3"))
	m := b.module(t, "default", "hello")
	assert.Nil(t, m.Spec.Replicas)
	assert.EqualValues(t, 2, m.Status.Replicas)
}

// movedOff waits until versioned's two replicas are Ready on other hosts
// than from, and it is unloaded from there; it returns the module.
func movedOff(t *testing.T, b *bed, from string) *v1alpha1.TinyModule {
	t.Helper()
	var m *v1alpha1.TinyModule
	eventually(t, 2*time.Minute, "the replica off "+from, func() error {
		m = b.module(t, "default", "versioned")
		on := readyOn(m)
		if len(on) != 2 || slices.Contains(on, from) || len(m.Status.Placements) != 2 {
			return fmt.Errorf("status %s", brief(m))
		}
		if _, loaded := b.loadedOn(t, "versioned")[from]; loaded {
			return fmt.Errorf("still loaded on %s", from)
		}
		return nil
	})
	return m
}
