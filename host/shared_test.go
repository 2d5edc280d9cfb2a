package host_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/abi/abitest"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestSharedCode: copies of one module under other names, warm or at zero
// instances, share one compiled module (one under another memory limit has
// its own: the rewrite bounds its tables by that limit); a copy at zero
// instances starts no instance to load; the copies are unloaded in a
// random order, the others answering until the last, and the last unload
// of each code closes it.
func TestSharedCode(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	const copies = 6
	names := make([]string, copies)
	pages := make([]uint32, copies)
	codes := func(loaded []int) int { // distinct memory limits among them
		seen := map[uint32]bool{}
		for _, i := range loaded {
			seen[pages[i]] = true
		}
		return len(seen)
	}
	for i := range names {
		names[i] = fmt.Sprintf("echo-%d", i)
		pages[i] = 4096
		if i == copies-1 {
			pages[i] = 2048
		}
		limits := api.Limits{MinInstances: new(i % 2), MemoryPages: pages[i]}
		info := load(t, h, "echo", host.LoadOptions{Name: names[i], Limits: limits})
		if i > 0 && i%2 == 0 {
			assert.Zero(t, info.Pool.Created, "%s: a copy at zero instances starts no instance to load", names[i])
		}
		if i == 1 {
			// Granted timers, its settings may set one: they are
			// delivered at load.
			info := load(t, h, "echo", host.LoadOptions{Name: "echo-timer", Limits: api.Limits{MinInstances: new(0)}, Capabilities: []string{abi.CapTimer}})
			assert.Equal(t, uint64(1), info.Pool.Created, "a copy granted timers starts an instance to load")
			require.NoError(t, h.Unload(t.Context(), "echo-timer"))
		}
		assert.Equal(t, codes([]int{0, i}), host.SharedCode(h), "%s shares the code of echo-0 under the same limits", names[i])
	}

	order := rand.Perm(copies)
	t.Logf("unload order %v", order)
	for k, i := range order {
		for _, j := range order[k:] {
			resp, err := invoke(t, h, names[j], "echo", "in", []byte(names[j]))
			require.NoError(t, err, "%s answers before %s is unloaded", names[j], names[i])
			assert.Equal(t, names[j], string(resp.Payload))
		}
		require.NoError(t, h.Unload(t.Context(), names[i]))
		_, err := invoke(t, h, names[i], "echo", "in", nil)
		require.ErrorIs(t, err, api.ErrNotFound)
		// A version unloaded closes in the background.
		want := codes(order[k+1:])
		require.Eventually(t, func() bool { return host.SharedCode(h) == want }, time.Minute, 5*time.Millisecond,
			"the copies left hold their code, %d, and no other", want)
	}

	load(t, h, "echo", host.LoadOptions{Limits: api.Limits{MinInstances: new(0)}})
	mustEcho(t, h)
	assert.Equal(t, 1, host.SharedCode(h))
}

// TestLoadSourceHeld: a source that pins the digest of bytes a module of
// the host was loaded from loads from the code the host holds, with no
// fetch (this host has no fetcher); other bytes still need one.
func TestLoadSourceHeld(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	wasm := abitest.Guest(t, "echo")
	sum := sha256.Sum256(wasm)
	src, err := api.NewSource("https://modules.example/echo.wasm", hex.EncodeToString(sum[:]))
	require.NoError(t, err)

	_, err = h.LoadSource(loadCtx(t), src, host.LoadOptions{Name: "tenant-1"})
	require.ErrorIs(t, err, api.ErrNoFetcher, "bytes the host does not hold are fetched")

	load(t, h, "echo", host.LoadOptions{})
	info, err := h.LoadSource(loadCtx(t), src, host.LoadOptions{Name: "tenant-1", Limits: api.Limits{MinInstances: new(0)}})
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(sum[:]), info.Digest)
	assert.Equal(t, src.String(), info.Source)
	assert.Zero(t, info.Pool.Created)
	resp, err := invoke(t, h, "tenant-1", "echo", "in", []byte("mine"))
	require.NoError(t, err)
	assert.Equal(t, "mine", string(resp.Payload))
	assert.Equal(t, 1, host.SharedCode(h))
}
