package controller

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
	"github.com/tinyhost/tinyhost/operator/internal/testbed"
)

// TestHostSync converges real hosts: modules a host loaded on its own are
// left alone, a restarted operator loads nothing twice and drops nothing, a
// host that restarts empty is loaded again, a host that stops answering is
// NotReady and its modules run elsewhere, and when it answers again nothing
// runs on it that is no longer placed there, also when the operator that
// moved them is restarted before the host answers again; a deleted
// TinyHost is drained.
func TestHostSync(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"}, hostSpec{name: "host-b"}, hostSpec{name: "host-c"})

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "greet"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "utils"}, Spec: v1alpha1.TinyModuleSpec{Image: b.comm.Ref, Replicas: replicas(2)}})
	b.ready(t, "default", "greet", time.Minute)
	b.ready(t, "default", "utils", time.Minute)
	b.converged(t, "greet", "utils")

	t.Run("a module the host loaded on its own is left alone", func(t *testing.T) { syncLeavesUnmanaged(t, b) })
	t.Run("operator restart: nothing loaded twice, nothing dropped", func(t *testing.T) { syncAfterRestart(t, b) })
	t.Run("a host that restarts empty is loaded again", func(t *testing.T) { syncHostRestarted(t, b) })
	t.Run("a host that stops answering, and comes back", func(t *testing.T) { syncHostLost(t, b) })
	t.Run("operator restarted while a host that lost its modules was stopped: it unloads only the copies left there", func(t *testing.T) { syncRestartedAfterMove(t, b) })
	t.Run("a deleted TinyHost is drained", func(t *testing.T) { syncHostDeleted(t, b) })
}

func syncLeavesUnmanaged(t *testing.T, b *bed) {
	ctx := ctxT(t, 2*time.Minute)
	h := b.hosts["host-a"]
	e2e.CopyFile(t, e2e.Wasm(t, testbed.Hello), filepath.Join(h.ModulesDir, "local.wasm"))
	eventually(t, 30*time.Second, "the file's module listed as Unmanaged", func() error {
		for _, e := range b.host(t, "host-a").Status.Modules {
			// The file's module is named by its descriptor: hello.
			if e.Name == "hello" && e.Namespace == "" && e.Phase == v1alpha1.PhaseUnmanaged {
				return nil
			}
		}
		return fmt.Errorf("modules %+v", b.host(t, "host-a").Status.Modules)
	})
	// The operator does not unload what it did not load.
	assert.Never(t, func() bool {
		mods, err := h.Loaded(ctx)
		_, ok := mods["hello"]
		return err != nil || !ok
	}, 2*b.opts.ProbeInterval, 100*time.Millisecond, "hello unloaded from host-a, or host-a not answering")
}

func syncAfterRestart(t *testing.T, b *bed) {
	ctx := ctxT(t, 2*time.Minute)
	before := map[string]map[string]int64{}
	var events e2e.HostEvents
	for name, h := range b.hosts {
		before[name] = e2e.LoadedAt(ctx, t, h.Client)
		events.Watch(ctx, t, name, h.Client, len(before[name]))
	}
	b.mgr.Stop(t)
	b.start(b.tb)
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
	m := b.ready(t, "default", "after", time.Minute)
	want := []string{readyOn(m)[0] + " TYPE_LOADED after"}
	require.Eventually(t, func() bool { return len(events.Seen()) > 0 }, 10*time.Second, 10*time.Millisecond, "no host event of the load of after")
	// A few probes of every host by the new operator load nothing else.
	assert.Never(t, func() bool { return !slices.Equal(events.Seen(), want) }, 3*b.opts.ProbeInterval, 50*time.Millisecond,
		"host events after the restart other than %q", want)
	assert.Equal(t, want, events.Seen(), "host events after the restart")
	for name, h := range b.hosts {
		now := e2e.LoadedAt(ctx, t, h.Client)
		delete(now, "after")
		assert.Equal(t, before[name], now, "modules of %s and when they were loaded", name)
	}
	b.ready(t, "default", "greet", time.Second)
	b.ready(t, "default", "utils", time.Second)
	b.remove(t, "default", "after")
}

func syncHostRestarted(t *testing.T, b *bed) {
	m := b.module(t, "default", "greet")
	name := readyOn(m)[0]
	old := b.hosts[name]
	old.Signal(t, syscall.SIGKILL)
	old.Wait(t, 10*time.Second)
	b.hosts[name] = testbed.StartHost(b.tb, name, "--listen", old.Addr, "--artifacts-plain-http", b.reg.Host)
	// Back within a probe or two, it is loaded again where it was;
	// had it been NotReady first, elsewhere. Either way: where placed.
	b.converged(t, "greet", "utils")
	b.ready(t, "default", "greet", time.Minute)
	t.Logf("greet was on %s, is now loaded on %v", name, slices.Sorted(maps.Keys(b.loadedOn(t, "greet"))))
}

func syncHostLost(t *testing.T, b *bed) {
	ctx := ctxT(t, 2*time.Minute)
	m := b.module(t, "default", "greet")
	lost := readyOn(m)[0]
	h := b.hosts[lost]
	h.Signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	cont := sync.OnceFunc(func() { h.Signal(t, syscall.SIGCONT) })
	t.Cleanup(cont)

	notReady := eventually(t, 15*time.Second, lost+" NotReady", func() error {
		th := b.host(t, lost)
		if c := meta.FindStatusCondition(th.Status.Conditions, v1alpha1.ConditionHostReady); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("conditions %+v", th.Status.Conditions)
		}
		return nil
	})
	eventually(t, 30*time.Second, "hello Ready elsewhere", func() error {
		m := b.module(t, "default", "greet")
		if on := readyOn(m); len(on) != 1 || on[0] == lost || m.Status.State != v1alpha1.StateReady {
			return fmt.Errorf("%s", brief(m))
		}
		return nil
	})
	elsewhere := time.Since(stopped)
	t.Logf("host stopped: NotReady after %v, its module Ready elsewhere after %v (limits 5s and 10s; `make bench` measures)",
		notReady.Round(10*time.Millisecond), elsewhere.Round(10*time.Millisecond))
	b.ready(t, "default", "utils", time.Minute)
	m = b.module(t, "default", "greet")
	out, err := invoke(ctx, t, readyAddr(m), "greet", "greeter", `{"name":"Ada"}`)
	require.NoError(t, err)
	assert.JSONEq(t, `{"greeting":"Hello, Ada!"}`, out)

	cont()
	eventually(t, 30*time.Second, lost+" Ready again", func() error {
		if !hostReady(b.host(t, lost)) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	b.converged(t, "greet", "utils")
}

// syncRestartedAfterMove: a host stops answering, its modules move and are
// Ready elsewhere, and the operator stops before the host answers again,
// as the one that moved them may before it unloads what the host still
// has. The next operator unloads those copies from that host, and only
// them: nothing placed is unloaded, nothing is loaded again.
func syncRestartedAfterMove(t *testing.T, b *bed) {
	ctx := ctxT(t, 2*time.Minute)
	lost := readyOn(b.module(t, "default", "greet"))[0]
	h := b.hosts[lost]
	had, err := h.Loaded(ctx)
	require.NoError(t, err)
	h.Signal(t, syscall.SIGSTOP)
	cont := sync.OnceFunc(func() { h.Signal(t, syscall.SIGCONT) })
	t.Cleanup(cont)
	var placed map[string][]string // module: hosts, as the first operator left them
	eventually(t, time.Minute, "greet and utils Ready off "+lost, func() error {
		placed = map[string][]string{}
		for _, name := range []string{"greet", "utils"} {
			m := b.module(t, "default", name)
			on := readyOn(m)
			if slices.Contains(on, lost) || int32(len(on)) != wanted(m) || m.Status.State != v1alpha1.StateReady {
				return fmt.Errorf("%s: %s", name, brief(m))
			}
			placed[name] = on
		}
		return nil
	})
	b.mgr.Stop(t)
	cont()

	// What the stopped host still has of the modules that moved: the
	// copies the next operator is to unload, and nothing else.
	var want []string
	for name := range placed {
		if _, ok := had[name]; ok {
			want = append(want, lost+" TYPE_UNLOADED "+name)
		}
	}
	require.NotEmpty(t, want, "%s had greet", lost)
	slices.Sort(want)
	before := map[string]map[string]int64{}
	var events e2e.HostEvents
	for name, h := range b.hosts {
		before[name] = e2e.LoadedAt(ctx, t, h.Client)
		events.Watch(ctx, t, name, h.Client, len(before[name]))
	}
	b.start(b.tb)
	eventually(t, time.Minute, "the copies left on "+lost+" unloaded", func() error {
		if got := slices.Sorted(slices.Values(events.Seen())); !slices.Equal(got, want) {
			return fmt.Errorf("host events %v, want %v", got, want)
		}
		return nil
	})
	// A few probes of every host by the new operator change nothing else.
	assert.Never(t, func() bool { return len(events.Seen()) != len(want) }, 3*b.opts.ProbeInterval, 50*time.Millisecond,
		"host events other than %v", want)
	t.Logf("%s stopped, %v Ready elsewhere, the operator restarted: host events %v", lost, placed, events.Seen())
	for name, h := range b.hosts {
		now := e2e.LoadedAt(ctx, t, h.Client)
		if name == lost {
			for mod := range placed {
				delete(before[name], mod)
			}
		}
		assert.Equal(t, before[name], now, "modules of %s and when they were loaded", name)
	}
	for name, on := range placed {
		m := b.ready(t, "default", name, time.Minute)
		assert.ElementsMatch(t, on, readyOn(m), "%s placed where the first operator placed it", name)
	}
	b.converged(t, "greet", "utils")
}

func syncHostDeleted(t *testing.T, b *bed) {
	ctx := ctxT(t, 2*time.Minute)
	m := b.module(t, "default", "greet")
	gone := readyOn(m)[0]
	require.NoError(t, b.c.Delete(ctx, b.host(t, gone)))
	eventually(t, 30*time.Second, "hello unloaded from "+gone+" and Ready elsewhere", func() error {
		m := b.module(t, "default", "greet")
		if on := readyOn(m); len(on) != 1 || on[0] == gone {
			return fmt.Errorf("%s", brief(m))
		}
		if _, ok := b.loadedOn(t, "greet")[gone]; ok {
			return fmt.Errorf("still loaded on %s", gone)
		}
		return nil
	})
	delete(b.hosts, gone)
	b.converged(t, "greet", "utils")
}

// TestHostGone: a host whose process died (its connection closes, its
// address refuses connections) is NotReady at once, not after
// FailureThreshold failed probes; a host that hangs (SIGSTOP: its
// connection stays, its probes time out) still waits for them. The
// threshold here is 60 probes, a minute: only the closed connection can
// make the killed host NotReady within the bound.
func TestHostGone(t *testing.T) {
	b := newBedWith(t, bedOptions{failureThreshold: 60}, hostSpec{name: "killed"}, hostSpec{name: "stopped"})
	hostCondition := func(name string) *metav1.Condition {
		return meta.FindStatusCondition(b.host(t, name).Status.Conditions, v1alpha1.ConditionHostReady)
	}
	for name := range b.hosts {
		eventually(t, 30*time.Second, name+" Ready", func() error {
			if c := hostCondition(name); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
	}

	t.Run("killed: NotReady without waiting for the threshold", func(t *testing.T) {
		h := b.hosts["killed"]
		h.Signal(t, syscall.SIGKILL)
		h.Wait(t, 10*time.Second)
		eventually(t, 15*time.Second, "killed NotReady", func() error {
			c := hostCondition("killed")
			if c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("condition %+v", c)
			}
			assert.Contains(t, c.Message, "nothing listens at "+h.Addr)
			return nil
		})
	})
	t.Run("stopped: Ready until the threshold", func(t *testing.T) {
		h := b.hosts["stopped"]
		h.Signal(t, syscall.SIGSTOP)
		t.Cleanup(func() { h.Signal(t, syscall.SIGCONT) })
		// Five probes time out, more than the default threshold of three.
		assert.Never(t, func() bool {
			c := hostCondition("stopped")
			return c == nil || c.Status != metav1.ConditionTrue
		}, 5*b.opts.ProbeInterval, 100*time.Millisecond, "the stopped host taken for NotReady before 60 failed probes")
	})
}

// converged checks that each module is loaded exactly where it is placed
// and Ready, per ListModules on every host.
func (b *bed) converged(t *testing.T, modules ...string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%v loaded exactly where placed", modules), func() error {
		for _, name := range modules {
			m := b.module(t, "default", name)
			want := readyOn(m)
			slices.Sort(want)
			on := b.loadedOn(t, name)
			got := slices.Sorted(maps.Keys(on))
			if !slices.Equal(got, want) || int32(len(want)) != wanted(m) {
				return fmt.Errorf("%s: loaded on %v, ready on %v", name, got, want)
			}
		}
		return nil
	})
}

// TestHostToken: a host that requires a bearer token is probed and loaded
// with the operator's DialOptions; the host refuses a client without it.
func TestHostToken(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	b := newBedWith(t, bedOptions{hostOptions: hostclient.Options{Token: "s3cret"}},
		hostSpec{name: "locked", args: []string{"--token-file", tokenFile}})
	ctx := ctxT(t, 2*time.Minute)

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "hello"}, Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref}})
	m := b.ready(t, "default", "hello", time.Minute)
	assert.Equal(t, []string{"locked"}, readyOn(m))
	_, err := b.hosts["locked"].Loaded(ctx)
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "a client without the token")
}

// TestHostNotVerified: with a token, the operator reaches hosts over TLS
// only (as tinyhost-operator sets it up); a TinyHost whose address is a
// plain TCP listener is Ready=False saying why, and the listener receives
// no credential.
func TestHostNotVerified(t *testing.T) {
	b := newBedWith(t, bedOptions{hostOptions: hostclient.Options{Token: "s3cret", TLS: true, TokenNeedsTLS: true}})
	rec := e2e.NewRecorder(t)
	require.NoError(t, b.c.Create(ctxT(t, time.Minute), &v1alpha1.TinyHost{ObjectMeta: metav1.ObjectMeta{Name: "stranger"}, Spec: v1alpha1.TinyHostSpec{Address: rec.Addr}}))
	eventually(t, 30*time.Second, "stranger Ready=False, saying why", func() error {
		c := meta.FindStatusCondition(b.host(t, "stranger").Status.Conditions, v1alpha1.ConditionHostReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "tls: first record does not look like a TLS handshake") {
			return fmt.Errorf("condition %+v", c)
		}
		t.Logf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
		return nil
	})
	assert.NotZero(t, rec.Bytes(), "the operator reached the listener")
	assert.False(t, rec.Received("s3cret"), "the listener received the token")
}
