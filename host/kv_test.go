package host_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/state"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/internal/hammer"
)

// openState opens an engine with cfg (an embedded one in a new directory
// when cfg is zero), closed when the test ends.
func openState(t *testing.T, cfg state.Config) *state.Engine {
	t.Helper()
	if cfg.Dir == "" && cfg.URL == "" {
		cfg.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	eng, err := state.Open(ctx, cfg)
	require.NoError(t, err)
	return eng
}

// kvHost is a host on eng with the kvstore module loaded with limits and
// the capabilities caps.
func kvHost(t *testing.T, eng *state.Engine, limits api.Limits, caps ...string) *host.Host {
	t.Helper()
	h, _ := newHost(t, host.Options{KV: eng})
	_, err := h.Load(loadCtx(t), e2e.WasmBytes(t, e2e.KVStore), host.LoadOptions{Capabilities: caps, Limits: limits})
	require.NoError(t, err)
	return h
}

// closeState closes the engines, in order, when the test ends, before
// the hosts made earlier close and check for goroutines left behind.
func closeState(t *testing.T, engines ...*state.Engine) {
	t.Cleanup(func() {
		for _, e := range engines {
			require.NoError(t, e.Close())
		}
	})
}

// kvDo makes the kvstore request req and returns its answer.
func kvDo(t *testing.T, h *host.Host, req string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := h.Invoke(ctx, api.Request{Module: "kvstore", Component: "kv", Port: "do", Payload: []byte(req)})
	require.NoError(t, err, req)
	return string(resp.Payload)
}

// TestKV: every operation of the kv import on the embedded JetStream
// store, as a guest sees it through the SDK.
func TestKV(t *testing.T) {
	hammer.NoLeaks(t)
	eng := openState(t, state.Config{})
	h := kvHost(t, eng, api.Limits{}, abi.CapKV)
	closeState(t, eng)

	assert.Equal(t, "not found: kv a.b: not found: kv: no such key", kvDo(t, h, "get a.b"))
	put := kvDo(t, h, "put a.b one")
	require.True(t, strings.HasPrefix(put, "ok "), put)
	rev := strings.TrimPrefix(put, "ok ")
	assert.Equal(t, "ok "+rev+" one", kvDo(t, h, "get a.b"))

	assert.Equal(t, "conflict: kv a.b: conflict: kv: revision conflict", kvDo(t, h, "create a.b two"))
	assert.Regexp(t, `^conflict: `, kvDo(t, h, "update a.b 999 two"))
	upd := kvDo(t, h, "update a.b "+rev+" two")
	require.Regexp(t, `^ok \d+$`, upd)
	assert.Regexp(t, `^conflict: `, kvDo(t, h, "update a.b "+rev+" three"), "a revision already replaced")
	assert.Equal(t, "ok "+strings.TrimPrefix(upd, "ok ")+" two", kvDo(t, h, "get a.b"))

	assert.Equal(t, "ok", kvDo(t, h, "delete a.b"))
	assert.Equal(t, "ok", kvDo(t, h, "delete a.b"), "deleting a key without a value")
	assert.Regexp(t, `^not found: `, kvDo(t, h, "get a.b"))
	assert.Regexp(t, `^ok \d+$`, kvDo(t, h, "create a.b again"), "a deleted key may be created")

	for _, k := range []string{"user.ann", "user.anna", "user.bob", "users", "user.an.x"} {
		require.Regexp(t, `^ok \d+$`, kvDo(t, h, "put "+k+" v"))
	}
	keys := func(req string) (string, []string) {
		got := strings.Fields(strings.TrimPrefix(kvDo(t, h, req), "ok "))
		require.NotEmpty(t, got, req)
		return got[0], got[1:]
	}
	more, ks := keys("keys user.an 0")
	assert.Equal(t, "false", more)
	assert.ElementsMatch(t, []string{"user.ann", "user.anna", "user.an.x"}, ks)
	more, ks = keys("keys user 0")
	assert.Equal(t, "false", more)
	assert.ElementsMatch(t, []string{"user.ann", "user.anna", "user.bob", "users", "user.an.x"}, ks)
	more, ks = keys("keys user. 2")
	assert.Equal(t, "true", more)
	assert.Len(t, ks, 2)
	more, ks = keys("keys - 0")
	assert.Equal(t, "false", more)
	assert.Len(t, ks, 6)
}

// TestKVDenied: a module not granted kv gets StatusDenied, and a host
// without a store StatusUnavailable.
func TestKVDenied(t *testing.T) {
	hammer.NoLeaks(t)
	eng := openState(t, state.Config{})
	h := kvHost(t, eng, api.Limits{}, abi.CapLog)
	closeState(t, eng)
	assert.Equal(t, "denied: kv k: denied: capability kv is not granted", kvDo(t, h, "get k"))

	bare, _ := newHost(t, host.Options{})
	_, err := bare.Load(loadCtx(t), e2e.WasmBytes(t, e2e.KVStore), host.LoadOptions{Capabilities: []string{abi.CapKV}})
	require.NoError(t, err)
	assert.Equal(t, "unavailable: kv k: unavailable: kv: the host has no state store", kvDo(t, bare, "get k"))
}

// TestKVHostile: keys and values past the limits, keys the ABI refuses,
// and a bucket filled past its quota are statuses; the module, its
// bucket and the host keep working.
func TestKVHostile(t *testing.T) {
	hammer.NoLeaks(t)
	eng := openState(t, state.Config{})
	h := kvHost(t, eng, api.Limits{MaxKVKeySize: 64, MaxKVValueSize: 1024, MaxKVBytes: 32 << 10}, abi.CapKV)
	closeState(t, eng)

	for _, c := range []struct{ req, want string }{
		{"put " + strings.Repeat("k", 65) + " v", "too large: kv " + strings.Repeat("k", 65) + ": too large: kv: key of 65 bytes, limit 64 (MaxKVKeySize)"},
		{"put " + strings.Repeat("k", 2000) + " v", "bad request: "},
		{"put k " + strings.Repeat("v", 1025), "too large: kv k: too large: kv: value of 1025 bytes, limit 1024 (MaxKVValueSize)"},
		{"put caf\xc3\xa9 v", "bad request: "},
		{"put \xff\xfe v", "bad request: "},
		{"put a..b v", "bad request: "},
		{"put .a v", "bad request: "},
		{"put a. v", "bad request: "},
		{"put a*b v", "bad request: "},
		{"put a>b v", "bad request: "},
		{"get", "bad request: "},
		{"update k 0 v", "bad request: "},
		{"keys a* 0", "bad request: "},
	} {
		got := kvDo(t, h, c.req)
		assert.True(t, strings.HasPrefix(got, c.want), "%.40q: got %.200q, want %.200q", c.req, got, c.want)
	}

	// 1000-byte values fill the 32 KiB bucket after a few dozen.
	got := kvDo(t, h, "fill f 1000 1000")
	assert.Equal(t, `quota: kv f.`, got[:len(`quota: kv f.`)], got)
	assert.Contains(t, got, "(MaxKVBytes 32768)")
	more := kvDo(t, h, "keys f. 0")
	n := len(strings.Fields(more)) - 2
	assert.Greater(t, n, 10, more)
	assert.Less(t, n, 33, more)
	big := strings.Repeat("x", 1000)
	assert.Regexp(t, `^quota: `, kvDo(t, h, "put g "+big), "the bucket stays full")
	assert.Regexp(t, `^ok \d+ x+$`, kvDo(t, h, "get f.0"), "what it holds stays readable")
	for i := range 5 {
		require.Equal(t, "ok", kvDo(t, h, fmt.Sprintf("delete f.%d", i)))
	}
	assert.Regexp(t, `^ok \d+$`, kvDo(t, h, "put g "+big), "deletes make room")
}

// TestKVReplicas: the replicas of a module on two hosts sharing one NATS
// server (one host's embedded server, listening on 127.0.0.1, the other
// connected to it) each increment one counter 1,000 times by
// compare-and-swap; none is lost.
func TestKVReplicas(t *testing.T) {
	hammer.NoLeaks(t)
	a := openState(t, state.Config{Listen: "127.0.0.1:0"})
	url := a.ClientURL()
	require.True(t, strings.HasPrefix(url, "nats://127.0.0.1:"), url)
	b := openState(t, state.Config{URL: url})
	ha := kvHost(t, a, api.Limits{}, abi.CapKV)
	hb := kvHost(t, b, api.Limits{}, abi.CapKV)
	closeState(t, b, a) // the client before the server it reaches

	const each = 1000
	var wg sync.WaitGroup
	for _, h := range []*host.Host{ha, hb} {
		wg.Go(func() {
			for range each {
				if got := kvDo(t, h, "incr counter"); !strings.HasPrefix(got, "ok ") {
					t.Errorf("incr: %s", got)
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Regexp(t, `^ok \d+ 2000$`, kvDo(t, ha, "get counter"))
	assert.Regexp(t, `^ok \d+ 2000$`, kvDo(t, hb, "get counter"))
}

// TestKVRestart: what a module stored is there after the host and its
// embedded store restart on the same directory.
func TestKVRestart(t *testing.T) {
	hammer.NoLeaks(t)
	dir := t.TempDir()
	for i, want := range []string{"", "ok 1 kept"} {
		t.Run(fmt.Sprint("run", i), func(t *testing.T) {
			eng := openState(t, state.Config{Dir: dir})
			h := kvHost(t, eng, api.Limits{}, abi.CapKV)
			closeState(t, eng)
			if want == "" {
				require.Equal(t, "ok 1", kvDo(t, h, "put k kept"))
				return
			}
			assert.Equal(t, want, kvDo(t, h, "get k"))
		})
	}
}

// keepingKV is a store that keeps the values it is given as they are, as
// one that writes them later would.
type keepingKV struct {
	mu   sync.Mutex
	kept map[string][]byte
}

func (s *keepingKV) Bucket(context.Context, string, host.KVQuota) (host.KVBucket, error) {
	return s, nil
}

func (s *keepingKV) Get(_ context.Context, key string) ([]byte, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kept[key]
	if !ok {
		return nil, 0, host.ErrKVNotFound
	}
	return v, 1, nil
}

func (s *keepingKV) Put(_ context.Context, key string, value []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept[key] = value
	return 1, nil
}

func (s *keepingKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	return s.Put(ctx, key, value)
}

func (s *keepingKV) Update(ctx context.Context, key string, value []byte, _ uint64) (uint64, error) {
	return s.Put(ctx, key, value)
}

func (s *keepingKV) Delete(context.Context, string) error { return nil }

func (s *keepingKV) Keys(context.Context, string, int) ([]string, bool, error) {
	return nil, false, nil
}

// TestKVValueOwned: the value a store is given is the store's, not a view
// of guest memory: the guest's next request, written where the first was,
// leaves it as it was, and it stays readable once the instance that wrote
// it has closed and its memory is unmapped.
func TestKVValueOwned(t *testing.T) {
	store := &keepingKV{kept: map[string][]byte{}}
	h, _ := newHost(t, host.Options{KV: store})
	_, err := h.Load(loadCtx(t), abitest.Guest(t, "kv"), host.LoadOptions{Capabilities: []string{abi.CapKV}})
	require.NoError(t, err)
	for _, r := range []abi.KVRequest{
		{Op: abi.KVPut, Key: "a", Value: []byte("first")},
		{Op: abi.KVPut, Key: "b", Value: []byte("other")},
	} {
		resp, err := invoke(t, h, "kv", "k", "do", abi.AppendKVRequest(nil, &r))
		require.NoError(t, err)
		require.Equal(t, byte(abi.StatusOK), resp.Payload[0], "%q", resp.Payload)
	}
	require.NoError(t, h.Unload(t.Context(), "kv"))
	require.NoError(t, h.Close(t.Context()))
	store.mu.Lock()
	defer store.mu.Unlock()
	assert.Equal(t, "first", string(store.kept["a"]))
	assert.Equal(t, "other", string(store.kept["b"]))
}
