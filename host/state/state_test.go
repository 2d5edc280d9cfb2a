package state_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/state"
)

func open(t *testing.T, cfg state.Config) *state.Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	e, err := state.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

// otherClient is another client of e's store, as an operator's tools or a
// hostile neighbour would be.
func otherClient(t *testing.T, e *state.Engine) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(e.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// TestConfig: a configuration that names no store, or two, or a bad
// namespace or replica count, is refused before anything starts.
func TestConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  state.Config
		want string
	}{
		{state.Config{}, "set either Dir"},
		{state.Config{Dir: t.TempDir(), URL: "nats://127.0.0.1:1"}, "set either Dir"},
		{state.Config{URL: "nats://127.0.0.1:1", Listen: "127.0.0.1:0"}, "a listen address is for the embedded server"},
		{state.Config{Dir: t.TempDir(), Namespace: "Bad_NS"}, `namespace "Bad_NS"`},
		{state.Config{Dir: t.TempDir(), Replicas: 6}, "replicas 6"},
		{state.Config{Dir: t.TempDir(), AckWait: time.Millisecond}, "ack wait 1ms: want at least 1s"},
	} {
		_, err := state.Open(t.Context(), c.cfg)
		assert.ErrorContains(t, err, c.want)
	}
}

// TestNoListener: the embedded server listens on no port unless asked.
func TestNoListener(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir()})
	assert.Empty(t, e.ClientURL())
}

// TestUnreachable: a cluster that does not answer yet (its servers start
// with the hosts) does not fail Open: what needs the store fails until a
// server listens there, and then works.
func TestUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close()) // a port nothing listens on
	e := open(t, state.Config{URL: "nats://" + addr, Timeout: 5 * time.Second})
	quota := host.KVQuota{MaxBytes: 1 << 20, MaxValueSize: 1 << 10}
	_, err = e.Bucket(t.Context(), "m", quota)
	require.Error(t, err, "no store yet")

	// A server comes up at the address: an embedded one, listening.
	open(t, state.Config{Dir: t.TempDir(), Listen: addr})
	var b host.KVBucket
	require.Eventually(t, func() bool {
		b, err = e.Bucket(t.Context(), "m", quota)
		return err == nil
	}, 2*time.Minute, 50*time.Millisecond, "the engine connects once the server is up")
	_, err = b.Put(t.Context(), "k", []byte("v"))
	require.NoError(t, err)
}

// TestBuckets: modules in different namespaces, and modules whose names
// differ only by "." and "_", have buckets of their own.
func TestBuckets(t *testing.T) {
	assert.Equal(t, "tinyhost_default_a_db__c", state.BucketName("default", "a.b_c"))
	assert.NotEqual(t, state.BucketName("x", "a.b"), state.BucketName("x", "a_b"))

	dir := t.TempDir()
	q := host.KVQuota{MaxBytes: 1 << 20, MaxValueSize: 1 << 10}
	var revs []uint64
	for _, c := range []struct{ ns, module string }{{"one", "m"}, {"two", "m"}, {"one", "m.x"}, {"one", "m_x"}} {
		e := open(t, state.Config{Dir: dir, Namespace: c.ns})
		b, err := e.Bucket(t.Context(), c.module, q)
		require.NoError(t, err)
		_, _, err = b.Get(t.Context(), "k")
		require.True(t, errors.Is(err, host.ErrKVNotFound), "%s/%s: %v", c.ns, c.module, err)
		rev, err := b.Create(t.Context(), "k", []byte(c.ns+"/"+c.module))
		require.NoError(t, err, "%s/%s", c.ns, c.module)
		revs = append(revs, rev)
		require.NoError(t, e.Close())
	}
	assert.Equal(t, []uint64{1, 1, 1, 1}, revs, "each created k in a bucket of its own")
}

// TestQuota: a full bucket answers ErrKVQuota; a larger quota, from a host
// opening the bucket later, makes room; a smaller one drops nothing.
func TestQuota(t *testing.T) {
	dir := t.TempDir()
	value := make([]byte, 1000)
	// fill puts values until the bucket is full and returns how many fit.
	fill := func(e *state.Engine, q host.KVQuota, from int) int {
		b, err := e.Bucket(t.Context(), "m", q)
		require.NoError(t, err)
		for i := from; ; i++ {
			_, err := b.Put(t.Context(), "k"+strconv.Itoa(i), value)
			if err != nil {
				require.ErrorIs(t, err, host.ErrKVQuota)
				return i
			}
			require.Less(t, i, 10000, "the quota is never reached")
		}
	}
	small := host.KVQuota{MaxBytes: 32 << 10, MaxValueSize: 2000}
	e := open(t, state.Config{Dir: dir})
	n := fill(e, small, 0)
	assert.Greater(t, n, 10)
	require.NoError(t, e.Close())

	e = open(t, state.Config{Dir: dir})
	m := fill(e, host.KVQuota{MaxBytes: 64 << 10, MaxValueSize: 2000}, n)
	assert.Greater(t, m, n+10, "the larger quota made room")
	require.NoError(t, e.Close())

	e = open(t, state.Config{Dir: dir})
	b, err := e.Bucket(t.Context(), "m", small)
	require.NoError(t, err)
	for _, i := range []int{0, m - 1} {
		_, _, err := b.Get(t.Context(), "k"+strconv.Itoa(i))
		assert.NoError(t, err, "k%d is kept under a smaller quota", i)
	}
}

// TestKeys: a listing stops at its limit, says that more match, leaves no
// goroutine behind (TestMain), and finds keys by any prefix, not only by
// whole "."-separated tokens.
func TestKeys(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir()})
	b, err := e.Bucket(t.Context(), "m", host.KVQuota{MaxBytes: 16 << 20, MaxValueSize: 100})
	require.NoError(t, err)
	for i := range 600 {
		_, err := b.Put(t.Context(), "a.k"+strconv.Itoa(i), []byte("v"))
		require.NoError(t, err)
	}
	keys, more, err := b.Keys(t.Context(), "", 1)
	require.NoError(t, err)
	assert.Len(t, keys, 1)
	assert.True(t, more)

	keys, more, err = b.Keys(t.Context(), "a.k59", 100)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a.k59", "a.k590", "a.k591", "a.k592", "a.k593", "a.k594", "a.k595", "a.k596", "a.k597", "a.k598", "a.k599"}, keys)
	assert.False(t, more)

	keys, more, err = b.Keys(t.Context(), "b", 100)
	require.NoError(t, err)
	assert.Empty(t, keys)
	assert.False(t, more)
}

// TestKeysStopped: a listing stopped before its end, at its limit or by
// its context, while the store's client is blocked handing it more keys
// than it holds at once, leaves no goroutine behind. A guest that lists
// one key at a time of a large bucket would otherwise leave one (and the
// subscription's keys) per listing.
func TestKeysStopped(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir()})
	b, err := e.Bucket(t.Context(), "m", host.KVQuota{MaxBytes: 16 << 20, MaxValueSize: 100})
	require.NoError(t, err)
	for i := range 1000 {
		_, err := b.Put(t.Context(), "a.k"+strconv.Itoa(i), []byte("v"))
		require.NoError(t, err)
	}
	for i := range 20 {
		byContext := i%2 == 1
		ctx, cancel := context.WithCancel(t.Context())
		taken := 0
		running := goroutines()
		state.OnKeyListed(b, func() {
			if taken++; taken == 1 {
				waitBlockedDelivering(running)
				if byContext {
					cancel()
				}
			}
		})
		before := goleak.IgnoreCurrent()
		limit := 1
		if byContext {
			limit = 10000
		}
		keys, more, err := b.Keys(ctx, "a.", limit)
		cancel()
		if byContext {
			require.ErrorIs(t, err, context.Canceled)
		} else {
			require.NoError(t, err)
			assert.Len(t, keys, 1)
			assert.True(t, more)
		}
		require.NoError(t, goleak.Find(before), "listing %d (stopped by its context: %v)", i, byContext)
	}
}

// TestKeysClosed: a listing whose engine closes before it has every key
// fails, rather than answering the keys it had as the whole listing.
func TestKeysClosed(t *testing.T) {
	e := open(t, state.Config{Dir: t.TempDir()})
	b, err := e.Bucket(t.Context(), "m", host.KVQuota{MaxBytes: 16 << 20, MaxValueSize: 100})
	require.NoError(t, err)
	for i := range 1000 {
		_, err := b.Put(t.Context(), "a.k"+strconv.Itoa(i), []byte("v"))
		require.NoError(t, err)
	}
	taken := 0
	state.OnKeyListed(b, func() {
		if taken++; taken == 1 {
			require.NoError(t, e.Close())
		}
	})
	keys, more, err := b.Keys(t.Context(), "", 10000)
	require.Error(t, err, "%d keys, more: %v", len(keys), more)
	t.Log(err)
}

// goroutines returns the stacks of the goroutines running, by their
// headers ("goroutine 7 [chan send]:").
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			gs := map[string]string{}
			for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
				head, _, _ := strings.Cut(g, "\n")
				id, _, _ := strings.Cut(head, " [")
				gs[id] = g
			}
			return gs
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitBlockedDelivering returns once a goroutine of the NATS client that
// delivers a subscription's messages, and is not one of before, is
// blocked sending one on a channel.
func waitBlockedDelivering(before map[string]string) {
	for {
		for id, g := range goroutines() {
			head, _, _ := strings.Cut(g, "\n")
			if _, old := before[id]; !old && strings.Contains(head, "[chan send") && strings.Contains(g, ".(*Conn).waitForMsgs(") {
				return
			}
		}
		runtime.Gosched()
	}
}
