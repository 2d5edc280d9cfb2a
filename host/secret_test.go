package host_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestSecrets: a module reads the secrets it is granted, from SecretFiles
// and from SecretsDir, and a rotated file at its next call without a
// reload; a secret not granted is denied, one whose file is gone is not
// found, a load granted a secret the host lacks fails. No value appears in
// any log line of the host, any reason or error, or the module listing.
func TestSecrets(t *testing.T) {
	dir, files := t.TempDir(), t.TempDir()
	token := filepath.Join(files, "token")
	value := func() string { return "value-" + rand.Text() }
	values := []string{value(), value(), value(), value()}
	write := func(path, v string) {
		// As Kubernetes does: a new file renamed over the old one.
		tmp := path + ".new"
		require.NoError(t, os.WriteFile(tmp, []byte(v), 0o600))
		require.NoError(t, os.Rename(tmp, path))
	}
	write(token, values[0])
	write(filepath.Join(dir, "db-password"), values[2])
	write(filepath.Join(dir, "other"), values[3])
	h, logs := newHost(t, host.Options{SecretFiles: map[string]string{"api-token": token}, SecretsDir: dir})

	var said []string // every reason and error the test saw
	get := func(name string) (abi.Status, string) {
		t.Helper()
		resp, err := h.Invoke(t.Context(), api.Request{Module: "secrets", Component: "s", Port: "get", Payload: []byte(name)})
		require.NoError(t, err)
		st, rest := abi.Status(resp.Payload[0]), string(resp.Payload[1:])
		if st != abi.StatusOK {
			said = append(said, rest)
		}
		return st, rest
	}
	_, err := h.Load(loadCtx(t), fixture(t, "secrets"), host.LoadOptions{Capabilities: []string{abi.CapLog, "secret:api-token", "secret:db-password"}})
	require.NoError(t, err)

	st, got := get("api-token")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, values[0], got)
	write(token, values[1])
	st, got = get("api-token")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, values[1], got, "the rotated value, without a reload")
	st, got = get("db-password")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, values[2], got)

	st, got = get("other")
	assert.Equal(t, abi.StatusDenied, st)
	assert.Contains(t, got, `may not read secret "other"`)
	require.NoError(t, os.Remove(filepath.Join(dir, "db-password")))
	st, got = get("db-password")
	assert.Equal(t, abi.StatusNotFound, st)
	assert.Contains(t, got, `secret "db-password"`)
	assert.NotContains(t, got, dir, "the host's paths are not the module's to see")
	write(filepath.Join(dir, "db-password"), strings.Repeat("x", abi.MaxSecretSize+1))
	st, got = get("db-password")
	assert.Equal(t, abi.StatusTooLarge, st, got)

	for caps, want := range map[string]string{"secret:missing": `secret "missing": this host has no such secret`, "secret": `"secret" names no secret`} {
		_, err = h.Load(loadCtx(t), fixture(t, "secrets"), host.LoadOptions{Name: "lacking", Capabilities: []string{caps}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
		said = append(said, err.Error())
	}

	info, ok := h.Module("secrets")
	require.True(t, ok)
	assert.Contains(t, info.Capabilities, "secret:api-token")
	listing := fmt.Sprintf("%+v %+v", h.Modules(), info)

	var lines []string
	logs.mu.Lock()
	for module, ls := range logs.lines {
		for _, l := range ls {
			lines = append(lines, module+" "+l.msg+" "+l.fields)
		}
	}
	logs.mu.Unlock()
	require.NotEmpty(t, lines)
	for _, v := range values {
		for _, l := range lines {
			assert.NotContains(t, l, v, "a log line")
		}
		for _, s := range said {
			assert.NotContains(t, s, v, "a reason or an error")
		}
		assert.NotContains(t, listing, v, "the listing")
	}
	t.Logf("searched %d log lines, %d reasons and errors and the listing for %d values", len(lines), len(said), len(values))
}

// TestSecretsGiven: values a load gives (LoadOptions.Secrets, the
// operator's) are served in place of the host's file of that name, and
// SetSecrets replaces them without a reload; a name SetSecrets leaves out
// falls back to the file. A load granted a secret only given by the load
// needs no file. No value appears in an error or the listing.
func TestSecretsGiven(t *testing.T) {
	files := t.TempDir()
	token := filepath.Join(files, "token")
	fromFile, given, rotated, tooBig := "file-"+rand.Text(), "given-"+rand.Text(), "rotated-"+rand.Text(), "big-"+rand.Text()
	require.NoError(t, os.WriteFile(token, []byte(fromFile), 0o600))
	h, _ := newHost(t, host.Options{SecretFiles: map[string]string{"api-token": token}})
	get := func(name string) (abi.Status, string) {
		t.Helper()
		resp, err := h.Invoke(t.Context(), api.Request{Module: "secrets", Component: "s", Port: "get", Payload: []byte(name)})
		require.NoError(t, err)
		return abi.Status(resp.Payload[0]), string(resp.Payload[1:])
	}
	_, err := h.Load(loadCtx(t), fixture(t, "secrets"), host.LoadOptions{
		Capabilities: []string{"secret:api-token", "secret:db-password"},
		Secrets:      map[string][]byte{"api-token": []byte(given), "db-password": []byte(given + "-db")},
	})
	require.NoError(t, err, "db-password has no file: the load's value is enough")
	st, got := get("api-token")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, given, got, "the load's value, not the file's")
	st, got = get("db-password")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, given+"-db", got)

	require.NoError(t, h.SetSecrets(t.Context(), "secrets", map[string][]byte{"db-password": []byte(rotated)}))
	st, got = get("db-password")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, rotated, got, "the new value, without a reload")
	st, got = get("api-token")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, fromFile, got, "left out of SetSecrets: the host's file")

	err = h.SetSecrets(t.Context(), "nope", map[string][]byte{"x": []byte(rotated)})
	require.ErrorIs(t, err, api.ErrNotFound)
	err = h.SetSecrets(t.Context(), "secrets", map[string][]byte{"db-password": []byte(tooBig + strings.Repeat("x", abi.MaxSecretSize))})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `secret "db-password" exceeds`)
	assert.NotContains(t, err.Error(), tooBig)
	st, got = get("db-password")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, rotated, got, "a refused SetSecrets changes nothing")
	listing := fmt.Sprintf("%+v", h.Modules())
	for _, v := range []string{given, rotated, tooBig} {
		assert.NotContains(t, listing, v)
	}
}

// TestSecretsNamespaceNoFiles: a module of a namespace (a tenant's, loaded
// by the operator) reads only the secrets its load gave, never the host's
// files of the same names: its load fails for a granted secret it was not
// given, and once SetSecrets takes the value away, a read is not found
// rather than the host's file. A module of no namespace reads the file.
func TestSecretsNamespaceNoFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "api-token"), []byte("the host's own"), 0o600))
	h, _ := newHost(t, host.Options{SecretsDir: dir})
	caps := []string{abi.CapLog, "secret:api-token"}
	tenant := map[string]string{api.LabelNamespace: "team-a"}
	get := func(module string) (abi.Status, string) {
		t.Helper()
		resp, err := h.Invoke(t.Context(), api.Request{Module: module, Component: "s", Port: "get", Payload: []byte("api-token")})
		require.NoError(t, err)
		return abi.Status(resp.Payload[0]), string(resp.Payload[1:])
	}

	_, err := h.Load(loadCtx(t), fixture(t, "secrets"), host.LoadOptions{Name: "tenant", Capabilities: caps, Labels: tenant})
	require.Error(t, err, "a tenant's module granted a secret it was not given")
	assert.Contains(t, err.Error(), `secret "api-token" was not given with the load: a module of namespace team-a reads only the secrets its load gave`)

	_, err = h.Load(loadCtx(t), fixture(t, "secrets"), host.LoadOptions{Name: "tenant", Capabilities: caps, Labels: tenant,
		Secrets: map[string][]byte{"api-token": []byte("team-a's")}})
	require.NoError(t, err)
	st, got := get("tenant")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, "team-a's", got)
	require.NoError(t, h.SetSecrets(t.Context(), "tenant", nil))
	st, got = get("tenant")
	assert.Equal(t, abi.StatusNotFound, st)
	assert.Contains(t, got, "was not given with the load")
	assert.NotContains(t, got, "the host's own")

	_, err = h.Load(loadCtx(t), fixture(t, "secrets"), host.LoadOptions{Name: "own", Capabilities: caps})
	require.NoError(t, err)
	st, got = get("own")
	require.Equal(t, abi.StatusOK, st, got)
	assert.Equal(t, "the host's own", got, "a module of no namespace reads the host's file")
}
