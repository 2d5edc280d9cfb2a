package controller

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// The operator's budget, measured by `make bench` (one run each, -benchtime=1x):
// a real apiserver, real hosts, the operator in process with its default
// probe settings (1 s interval, 1 s timeout, 3 failures).
//
//   - BenchmarkApplyToReady: TinyModules created (as kubectl apply does) to
//     every one Ready, for 1 and 100 modules over 3 hosts.
//   - BenchmarkHostLoss: a host stops answering (SIGSTOP) to its TinyHost
//     NotReady, and to every module it ran Ready elsewhere; "probes" for a
//     host registered by hand, "leases" for one that registers itself and
//     renews a Lease (3 s, every second).

func BenchmarkApplyToReady(b *testing.B) {
	bd := newBed(b, hostSpec{name: "host-a"}, hostSpec{name: "host-b"}, hostSpec{name: "host-c"})
	// Warm the hosts' artifact and compilation caches, as a running
	// cluster's are: the first load of a module on a host is the fetch
	// and compile of ~0.5 s.
	warm := bd.applyAll(b, "warm", 3, 3)
	bd.deleteAll(b, warm)
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("modules=%d", n), func(b *testing.B) {
			var total time.Duration
			for i := range b.N {
				start := time.Now()
				names := bd.applyAll(b, fmt.Sprintf("m%d-%d", n, i), n, 1)
				took := time.Since(start)
				total += took
				b.StopTimer()
				bd.deleteAll(b, names)
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/apply")
			b.ReportMetric(total.Seconds()/float64(b.N*n)*1000, "ms/module")
		})
	}
}

// applyAll creates n TinyModules of hello named prefix-<i> with replicas,
// and waits until every one is Ready. Each asks for one instance of 32 MiB:
// a host admits a module by the memory of its warm instances, and at the
// default limits (one warm instance of 256 MiB) a host of this machine's
// default budget takes fewer modules than the benchmarks place.
func (b *bed) applyAll(t testing.TB, prefix string, n int, replicas int32) []string {
	t.Helper()
	ctx := t.Context()
	names := make([]string, n)
	pages, instances := int32(512), int32(1)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: "default"},
			Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Replicas: &replicas,
				Limits: &v1alpha1.Limits{MemoryPages: &pages, MaxInstances: &instances}}}
		if err := b.c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Minute, fmt.Sprintf("%d modules Ready", n), func() error {
		var list v1alpha1.TinyModuleList
		if err := b.c.List(ctx, &list, client.InNamespace("default")); err != nil {
			return err
		}
		ready := 0
		for _, m := range list.Items {
			if slices.Contains(names, m.Name) && isReady(&m) {
				ready++
			}
		}
		if ready != n {
			return fmt.Errorf("%d/%d Ready", ready, n)
		}
		return nil
	})
	return names
}

func isReady(m *v1alpha1.TinyModule) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == m.Generation
}

// deleteAll deletes the modules and waits until they are gone.
func (b *bed) deleteAll(t testing.TB, names []string) {
	t.Helper()
	ctx := t.Context()
	for _, name := range names {
		err := b.c.Delete(ctx, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Minute, "modules gone", func() error {
		var list v1alpha1.TinyModuleList
		if err := b.c.List(ctx, &list, client.InNamespace("default")); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d left", len(list.Items))
		}
		return nil
	})
}

// BenchmarkHostLoss: a host stops (SIGSTOP) to its TinyHost NotReady and
// to every module it ran Ready elsewhere, for hosts registered by hand
// (probes alone: three failures at 1 s) and for hosts that register
// themselves (their Lease, 3 s renewed every second, alongside the probes).
func BenchmarkHostLoss(b *testing.B) {
	for _, registered := range []bool{false, true} {
		name := "probes"
		if registered {
			name = "leases"
		}
		b.Run(name, func(b *testing.B) { hostLoss(b, registered) })
	}
}

func hostLoss(b *testing.B, registered bool) {
	const modules = 30
	bd := newBed(b)
	start := func(name string) {
		if registered {
			bd.hosts[name] = testbed.StartHost(b, name, "--artifacts-plain-http", bd.reg.Host,
				"--register", "--kubeconfig", bd.env.Kubeconfig, "--namespace", "default")
		} else {
			bd.hosts[name] = testbed.StartHost(b, name, "--artifacts-plain-http", bd.reg.Host)
			testbed.Register(b, bd.c, name, bd.hosts[name].Addr, nil)
		}
		eventually(b, time.Minute, name+" Ready", func() error {
			var h v1alpha1.TinyHost
			if err := bd.c.Get(b.Context(), client.ObjectKey{Name: name}, &h); err != nil {
				return err
			}
			if !hostReady(&h) {
				return fmt.Errorf("not ready")
			}
			return nil
		})
	}
	for _, name := range []string{"host-a", "host-b", "host-c"} {
		start(name)
	}
	names := bd.applyAll(b, "loss", modules, 1)
	var notReady, elsewhere time.Duration
	var moved int
	for i := range b.N {
		b.StopTimer()
		// A fresh host each round, so that every round loses one.
		start(fmt.Sprintf("spare-%d", i))
		victim, lost := bd.busiest(b, names)
		b.StartTimer()

		bd.hosts[victim].Signal(b, syscall.SIGSTOP)
		start := time.Now()
		var once sync.Once
		eventually(b, time.Minute, "every module of "+victim+" Ready elsewhere", func() error {
			if !hostReady(bd.host(b, victim)) {
				once.Do(func() { notReady += time.Since(start) })
			}
			for _, name := range lost {
				m := bd.module(b, "default", name)
				if on := readyOn(m); !isReady(m) || len(on) != 1 || on[0] == victim {
					return fmt.Errorf("%s: %s", name, brief(m))
				}
			}
			return nil
		})
		elsewhere += time.Since(start)
		moved += len(lost)

		b.StopTimer()
		// The lost host is gone for good: its TinyHost deleted (it does not
		// answer, so it is not drained) and its process stopped.
		if err := bd.c.Delete(b.Context(), bd.host(b, victim)); err != nil {
			b.Fatal(err)
		}
		bd.hosts[victim].Signal(b, syscall.SIGKILL)
		delete(bd.hosts, victim)
		b.StartTimer()
	}
	b.ReportMetric(notReady.Seconds()/float64(b.N), "s/notready")
	b.ReportMetric(elsewhere.Seconds()/float64(b.N), "s/ready-elsewhere")
	b.ReportMetric(float64(moved)/float64(b.N), "modules-moved")
}

// busiest is the host that runs the most of the modules, and those.
func (bd *bed) busiest(b *testing.B, names []string) (string, []string) {
	perHost := map[string][]string{}
	for _, name := range names {
		for _, on := range readyOn(bd.module(b, "default", name)) {
			perHost[on] = append(perHost[on], name)
		}
	}
	var victim string
	for name, ms := range perHost {
		if victim == "" || len(ms) > len(perHost[victim]) {
			victim = name
		}
	}
	return victim, perHost[victim]
}
