package server_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	hostv1 "github.com/tinyhost/tinyhost/host/proto/tinyhost/host/v1"
	"github.com/tinyhost/tinyhost/host/server"
)

// TestListingSurvivesBadText: a module whose port schema is valid JSON but
// not UTF-8 is refused at load, with an error naming the field, and every
// listing goes on working; a module loaded from a file whose name is not
// UTF-8 (its source) is listed, by ListModules, Info and Watch, with its
// text made valid, and the host says so.
func TestListingSurvivesBadText(t *testing.T) {
	dir := t.TempDir()
	sink := &lineCounter{}
	logger := hclog.NewInterceptLogger(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Off})
	logger.RegisterSink(sink)
	e := newEnv(t, envOptions{host: host.Options{ModulesDir: dir, Logger: logger}, server: server.Options{Logger: logger}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	watch, err := e.client.Watch(ctx, &hostv1.WatchRequest{})
	require.NoError(t, err)

	bad, err := os.ReadFile(filepath.Join("testdata", "badschema.wasm"))
	require.NoError(t, err)
	_, err = loadStream(ctx, e.client, &hostv1.LoadHeader{}, bad, 1<<20)
	wantStatus(t, err, codes.InvalidArgument, api.ReasonBadModule, "component 0: port 0: the schema is not valid UTF-8")
	ev, err := watch.Recv()
	require.NoError(t, err)
	assert.Equal(t, hostv1.WatchEvent_TYPE_FAILED, ev.GetType())
	assert.Contains(t, ev.GetError(), "the schema is not valid UTF-8")

	// A file name is any bytes on Linux; the host keeps it as the source.
	file := filepath.Join(dir, "echo-\xff.wasm")
	require.NoError(t, os.WriteFile(file, guest(t, "echo"), 0o644))
	ev, err = watch.Recv()
	require.NoError(t, err)
	require.Equal(t, hostv1.WatchEvent_TYPE_LOADED, ev.GetType(), "%v", ev)
	want := filepath.Join(dir, "echo-\uFFFD.wasm")
	assert.Equal(t, want, ev.GetInfo().GetSource())

	list, err := e.client.ListModules(ctx, &hostv1.ListModulesRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetModules(), 1)
	assert.Equal(t, want, list.GetModules()[0].GetSource())
	info, err := e.client.Info(ctx, &hostv1.InfoRequest{})
	require.NoError(t, err)
	require.Len(t, info.GetModules(), 1)
	assert.Equal(t, want, info.GetModules()[0].GetSource())

	assert.Equal(t, 1, sink.count("module entry is not valid UTF-8: its texts are sent made valid, its schemas left out"),
		"the host says so, once")
}

// lineCounter counts the lines a host logs, by message.
type lineCounter struct {
	mu    sync.Mutex
	lines map[string]int
}

func (c *lineCounter) Accept(_ string, _ hclog.Level, msg string, _ ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lines == nil {
		c.lines = map[string]int{}
	}
	c.lines[msg]++
}

func (c *lineCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines[msg]
}
