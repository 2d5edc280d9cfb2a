package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
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

// TestCallFailedLogIsOneLine: a call that fails with a reason the guest
// wrote (a newline, a forged host line, ESC, CR, NUL, bytes not UTF-8) is
// logged by the server at debug level as one line of the server's, with no
// raw control byte.
func TestCallFailedLogIsOneLine(t *testing.T) {
	var out e2e.LogBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug})
	e := newEnv(t, envOptions{server: server.Options{Logger: logger}})
	wasm, err := os.ReadFile(filepath.Join("testdata", "failer.wasm"))
	require.NoError(t, err)
	e.load(t, wasm, "", api.Limits{})

	_, err = e.invoke(t, "failer", "c", "in", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "forged", "the caller gets the reason")

	text := out.String()
	var failed int
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		for _, c := range []byte(line) {
			assert.False(t, c < 0x20 || c == 0x7f, "raw control byte %#x in the log line %q", c, line)
		}
		assert.True(t, utf8.ValidString(line), "log line not UTF-8: %q", line)
		assert.False(t, strings.HasPrefix(line, "2026-01-01T00:00:00.000Z") || strings.HasPrefix(line, "  |"),
			"a log line the guest authored: %q", line)
		if strings.Contains(line, "call failed") {
			failed++
		}
	}
	assert.Equal(t, 1, failed, "one call-failed line:\n%s", text)
}

// TestEmittedMetadataNotUTF8: a message a module emits with a metadata
// value that is not UTF-8 reaches the caller made valid, in Invoke's
// answer and in an InvokeStream's, and the stream, which other calls
// share, goes on answering them.
func TestEmittedMetadataNotUTF8(t *testing.T) {
	e := newEnv(t, envOptions{})
	wasm, err := os.ReadFile(filepath.Join("testdata", "badmeta.wasm"))
	require.NoError(t, err)
	e.load(t, wasm, "", api.Limits{})
	e.load(t, guest(t, "echo"), "", api.Limits{})

	resp, err := e.invoke(t, "badmeta", "e", "in", nil)
	require.NoError(t, err)
	require.Len(t, resp.GetEmitted(), 1)
	md := resp.GetEmitted()[0].GetMetadata()
	require.Len(t, md, 1)
	assert.Equal(t, "k", md[0].GetKey())
	assert.Equal(t, "\uFFFD", md[0].GetValue())

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := e.client.InvokeStream(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&hostv1.InvokeStreamRequest{Id: 1, Request: &hostv1.InvokeRequest{Module: "badmeta", Component: "e", Port: "in"}}))
	got, err := stream.Recv()
	require.NoError(t, err, "the stream survives the module's message")
	assert.Equal(t, uint64(1), got.GetId())
	assert.Nil(t, got.GetError())
	require.NoError(t, stream.Send(&hostv1.InvokeStreamRequest{Id: 2, Request: &hostv1.InvokeRequest{Module: "echo", Component: "echo", Port: "in", Payload: []byte("hi")}}))
	got, err = stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), got.GetId())
	assert.Equal(t, "hi", string(got.GetResponse().GetPayload()))
	require.NoError(t, stream.CloseSend())
}
