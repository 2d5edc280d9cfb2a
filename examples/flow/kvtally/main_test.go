package main

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

func total(t *testing.T, h *sdktest.Harness) Total {
	t.Helper()
	b, err := h.Handle("total", []byte("{}"))
	require.NoError(t, err)
	var tot Total
	require.NoError(t, json.Unmarshal(b, &tot), "%s", b)
	return tot
}

// TestReplicasCountEachIDOnce: two instances sharing one bucket, as two
// replicas on two hosts share the module's, each receive every one of 500
// messages (each ID delivered twice, at the same time on both): 500
// counted, their values summed once. Messages without an ID all count.
func TestReplicasCountEachIDOnce(t *testing.T) {
	kv := &sdktest.KV{}
	a, b := sdktest.New("counter"), sdktest.New("counter")
	a.SetKV(kv)
	b.SetKV(kv)
	const n = 500
	var wg sync.WaitGroup
	for _, h := range []*sdktest.Harness{a, b} {
		wg.Go(func() {
			for i := range n {
				if _, err := h.Handle("in", fmt.Appendf(nil, `{"value":%d}`, i), abi.MetaMessageID, fmt.Sprintf("msg-%d", i)); err != nil {
					t.Errorf("in: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, Total{Count: n, Sum: n * (n - 1) / 2}, total(t, a))
	assert.Equal(t, Total{Count: n, Sum: n * (n - 1) / 2}, total(t, b))

	for range 2 {
		_, err := a.Handle("in", []byte("1"))
		require.NoError(t, err)
	}
	assert.Equal(t, Total{Count: n + 2, Sum: n*(n-1)/2 + 2}, total(t, b))
}

// TestStoppedBetweenWrites: a handler that added its item to the total
// and failed before it marked the ID seen (here: the bucket full after
// the first write) is redelivered; the item is not added again, and the
// redelivery marks the ID.
func TestStoppedBetweenWrites(t *testing.T) {
	first, err := json.Marshal(stored{Total{Count: 1, Sum: 5}, []string{"m1"}})
	require.NoError(t, err)
	// Room for "total" and its value, not for the mark besides.
	kv := &sdktest.KV{MaxBytes: int64(len("total") + len(first))}
	h := sdktest.New("counter")
	h.SetKV(kv)
	_, err = h.Handle("in", []byte("5"), abi.MetaMessageID, "m1")
	require.ErrorIs(t, err, sdk.ErrQuota)
	v, ok := kv.Get("total")
	require.True(t, ok)
	require.JSONEq(t, string(first), string(v))
	_, ok = kv.Get("seen/m1")
	require.False(t, ok)

	kv.MaxBytes = 1 << 20
	_, err = h.Handle("in", []byte("5"), abi.MetaMessageID, "m1")
	require.NoError(t, err)
	assert.Equal(t, Total{Count: 1, Sum: 5}, total(t, h))
	_, ok = kv.Get("seen/m1")
	assert.True(t, ok, "the redelivery marks the ID seen")
}

// TestSeenKey: an ID with bytes a key may not hold still makes a valid
// key, one per ID.
func TestSeenKey(t *testing.T) {
	kv := &sdktest.KV{}
	h := sdktest.New("counter")
	h.SetKV(kv)
	for _, id := range []string{"a.b", "a=2eb", "../x", "a b", "ü"} {
		_, err := h.Handle("in", []byte("1"), abi.MetaMessageID, id)
		require.NoError(t, err, id)
		_, err = h.Handle("in", []byte("1"), abi.MetaMessageID, id)
		require.NoError(t, err, id)
	}
	assert.Equal(t, Total{Count: 5, Sum: 5}, total(t, h))
}
