package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// The http component, compiled to wasm, calls a server on 127.0.0.1 through
// a real host, with a secret from a file as its bearer token; without the
// grant of that host the same call is denied.
func TestHTTPThroughHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			// Larger than the SDK's first result buffer: fetched with the
			// result import.
			_, _ = w.Write(bytes.Repeat([]byte("x"), 100<<10))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"auth": r.Header.Get("Authorization"), "path": r.URL.Path})
	}))
	t.Cleanup(srv.Close)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("t0ken"), 0o600))
	h, err := host.New(ctx, host.Options{SecretFiles: map[string]string{"api-token": token}})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.WithoutCancel(t.Context())) })

	config := `{"http": {"url": "` + srv.URL + `/items", "secret": "api-token"}}`
	wasm := e2e.WasmBytes(t, "plugins/common")
	grant := abi.CapHTTP + ":" + srv.Listener.Addr().String()
	_, err = h.Load(ctx, wasm, host.LoadOptions{Config: json.RawMessage(config), Capabilities: []string{abi.CapLog, grant, "secret:api-token"}})
	require.NoError(t, err)
	resp, err := h.Invoke(ctx, api.Request{Module: "common", Component: "http", Port: "in", Payload: []byte(`{}`)})
	require.NoError(t, err)
	assert.JSONEq(t, `{"auth":"Bearer t0ken","path":"/items"}`, string(mustBody(t, resp.Payload)))
	require.Len(t, resp.Emitted, 1)
	assert.Equal(t, "out", resp.Emitted[0].Port)
	resp, err = h.Invoke(ctx, api.Request{Module: "common", Component: "http", Port: "in", Payload: []byte(`{"url":"` + srv.URL + `/big"}`)})
	require.NoError(t, err)
	var big string
	require.NoError(t, json.Unmarshal(mustBody(t, resp.Payload), &big))
	assert.Equal(t, strings.Repeat("x", 100<<10), big)

	_, err = h.Load(ctx, wasm, host.LoadOptions{Name: "ungranted", Config: json.RawMessage(config), Capabilities: []string{abi.CapLog, "secret:api-token"}})
	require.NoError(t, err)
	_, err = h.Invoke(ctx, api.Request{Module: "ungranted", Component: "http", Port: "in", Payload: []byte(`{}`)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "http GET "+srv.URL+"/items: denied: capability http is not granted")
}

// mustBody is the body member of the component's reply.
func mustBody(t *testing.T, reply []byte) json.RawMessage {
	t.Helper()
	var r struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}
	require.NoError(t, json.Unmarshal(reply, &r), "%s", reply)
	require.Equal(t, http.StatusOK, r.Status, "%s", reply)
	return r.Body
}
