package server_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/client"
)

// TestLimitsWire: every field of api.Limits crosses the wire both ways: a
// load through host/client puts the very limits it sent in force on the
// host, and the host's answer sets every field of the proto's Limits,
// min_instances present at 0.
func TestLimitsWire(t *testing.T) {
	want := api.Limits{
		MemoryPages: 512, CallTimeout: 3 * time.Second, MaxMessageSize: 1 << 20,
		MinInstances: new(0), MaxInstances: 3, QueueTimeout: 2 * time.Second, IdleTimeout: 40 * time.Second,
		RecyclePages: 300, LogLinesPerSecond: 50, LogBytesPerSecond: 100 << 10,
		MinTimerInterval: 20 * time.Millisecond, MaxTimers: 5, MaxSends: 7,
		HTTPTimeout: 4 * time.Second, MaxHTTPRequestSize: 1000, MaxHTTPResponseSize: 2000, MaxHTTPHeaders: 7,
		MaxHTTPHeaderBytes: 3000, MaxHTTPRedirects: -1, MaxHTTPRequests: 3, MaxEmits: 9,
		MaxKVKeySize: 100, MaxKVValueSize: 4000, MaxKVBytes: 1 << 20, MaxKVListKeys: 50,
	}
	v := reflect.ValueOf(want)
	for i := range v.NumField() {
		require.False(t, v.Field(i).IsZero(), "the test sets every field of api.Limits, %s too", v.Type().Field(i).Name)
	}

	e := newEnv(t, envOptions{})
	c, err := client.New(e.addr, client.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	// Minutes: a load compiles, on a machine that may be busy.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	resp, err := c.Load(ctx, client.Module{Name: "limited", Wasm: guest(t, "echo"), Limits: want})
	require.NoError(t, err)

	info, ok := e.h.Module("limited")
	require.True(t, ok)
	assert.Equal(t, want, info.Limits, "the limits sent are the limits in force")

	l := resp.GetModule().GetLimits().ProtoReflect()
	fields := l.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		assert.True(t, l.Has(f), "the host's answer sets %s", f.Name())
	}
	assert.Equal(t, protoreflect.Name("min_instances"), fields.ByNumber(4).Name())
	assert.Equal(t, uint32(0), resp.GetModule().GetLimits().GetMinInstances())
}
