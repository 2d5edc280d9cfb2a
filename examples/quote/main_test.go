package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/sdk/sdktest"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// quotes is the API of the example: GET /quote?topic=T with the bearer
// token key answers a quote; another token, 401.
func quotes(key *atomic.Value) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key.Load().(string) {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"quote": "Clear is better than clever (" + r.URL.Query().Get("topic") + ").", "by": "Rob Pike"})
	})
}

// TestQuote runs the component natively: sdktest answers its request with
// the API's handler and gives it the secret.
func TestQuote(t *testing.T) {
	var key atomic.Value
	key.Store("k1")
	h := sdktest.New("quote")
	h.OnHTTP(quotes(&key))
	h.SetSecret("quotes-key", []byte("k1\n"))
	require.NoError(t, h.SetSettings([]byte(`{"url":"https://quotes.example.com/quote"}`)))
	reply, err := h.Handle("in", []byte(`{"topic":"go"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"quote":"Clear is better than clever (go).","by":"Rob Pike"}`, string(reply))

	h.SetSecret("quotes-key", []byte("wrong"))
	_, err = h.Handle("in", []byte(`{"topic":"go"}`))
	assert.ErrorContains(t, err, "401 Unauthorized")
}

// TestReadme runs the README: a real tinyhost with the key as a --secret,
// the module loaded with tinyctl and the grants of the API's host and of
// the secret, a call, a key rotated on disk and at the API without a
// reload, and the same module without the http grant, denied.
func TestReadme(t *testing.T) {
	var key atomic.Value
	key.Store("qk-alpha-1")
	api := httptest.NewServer(quotes(&key))
	t.Cleanup(api.Close)
	keyFile := filepath.Join(t.TempDir(), "quotes-key")
	require.NoError(t, os.WriteFile(keyFile, []byte("qk-alpha-1\n"), 0o600))

	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--secret", "quotes-key=" + keyFile}})
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	env := []string{"TINYCTL_ADDR=" + h.Addr}
	wasm := e2e.Wasm(t, "examples/quote")
	config := fmt.Sprintf(`{"quote":{"url":"%s/quote"}}`, api.URL)
	grant := "http:" + api.Listener.Addr().String()

	res := e2e.Run(t, env, tinyctl, "load", wasm, "--config", config, "--cap", "log", "--cap", grant, "--cap", "secret:quotes-key")
	require.Equal(t, 0, res.Code, "stderr: %s", res.Stderr)
	call := func(module string) e2e.Result {
		return e2e.Run(t, env, tinyctl, "call", module+"/quote", `{"topic":"go"}`)
	}
	res = call("quote")
	require.Equal(t, 0, res.Code, "stderr: %s", res.Stderr)
	assert.Contains(t, res.Stdout, "Clear is better than clever (go).")
	t.Logf("$ tinyctl call quote/quote '{\"topic\":\"go\"}'\n%s", res.Stdout)

	key.Store("qk-beta-2")
	require.NoError(t, os.WriteFile(keyFile+".new", []byte("qk-beta-2\n"), 0o600))
	require.NoError(t, os.Rename(keyFile+".new", keyFile))
	res = call("quote")
	assert.Equal(t, 0, res.Code, "the rotated key, without a reload; stderr: %s", res.Stderr)

	res = e2e.Run(t, env, tinyctl, "load", wasm, "--name", "nohttp", "--config", config, "--cap", "log", "--cap", "secret:quotes-key")
	require.Equal(t, 0, res.Code, "stderr: %s", res.Stderr)
	res = call("nohttp")
	assert.Equal(t, 5, res.Code, "not allowed (PERMISSION_DENIED)")
	assert.Contains(t, res.Stderr, "denied: capability http is not granted")
	t.Logf("$ tinyctl call nohttp/quote ... (exit %d)\n%s", res.Code, res.Stderr)
	assert.NotContains(t, h.Log(), "qk-alpha-1", "the key in the host's log")
	assert.NotContains(t, h.Log(), "qk-beta-2", "the key in the host's log")
}
