//go:build linux

package main_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyhost/tinyhost/host"
	hostclient "github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestConfigMistakes runs the daemon with one configuration mistake at a
// time: each exits 2 (the code of a usage error, cmd/README.md) at once,
// with a message on stderr naming the mistake. The test logs the table.
func TestConfigMistakes(t *testing.T) {
	bin := e2e.Binary(t, "cmd/tinyhost")
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	ca := e2e.NewCA(t, "tinyhost CA")
	now := time.Now()
	expiredCert, expiredKey := ca.Issue(t, e2e.Leaf{Name: "expired", IPs: []string{"127.0.0.1"}, Server: true,
		NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	futureCert, futureKey := ca.Issue(t, e2e.Leaf{Name: "future", IPs: []string{"127.0.0.1"}, Server: true,
		NotBefore: now.Add(24 * time.Hour), NotAfter: now.Add(48 * time.Hour)})
	admin := file("admin", "same-s3cret")
	invoke := file("invoke", "same-s3cret")
	huge := strings.Repeat("v", 1<<20)

	rows := []struct {
		mistake string
		args    []string
		env     []string
		want    string
	}{
		{"negative --max-connections", []string{"--max-connections", "-1"}, nil, "max-connections is -1"},
		{"--memory-pages over --maximum-memory-pages", []string{"--memory-pages", "20000"}, nil, "MemoryPages is 20000, this host's maximum is 16384"},
		{"negative --call-timeout", []string{"--call-timeout", "-1s"}, nil, "CallTimeout is -1s"},
		{"unknown capability", []string{"--capabilities", "disk"}, nil, `unknown capability "disk"`},
		{"missing token file", []string{"--token-file", filepath.Join(dir, "nonexistent")}, nil, "token-file"},
		{"one token for two roles", []string{"--token-file", admin, "--invoke-token-file", invoke}, nil, "token-file and invoke-token-file hold the same token"},
		{"misspelt variable", nil, []string{"TINYHOST_TOKENFILE=" + admin}, "unknown environment variables TINYHOST_TOKENFILE (did you mean TINYHOST_TOKEN_FILE?)"},
		{"certificate expired yesterday", []string{"--tls-cert", expiredCert, "--tls-key", expiredKey}, nil, "expired at"},
		{"certificate not yet valid", []string{"--tls-cert", futureCert, "--tls-key", futureKey}, nil, "is not valid before"},
		{"name of 1 MiB", []string{"--config", file("name.yaml", "name: "+huge+"\n")}, nil, "is not a DNS subdomain (RFC 1123)"},
		{"name with capitals and '_'", []string{"--name", "Edge_1"}, nil, `name "Edge_1" is not a DNS subdomain`},
		{"label value of 1 MiB", []string{"--config", file("label.yaml", "labels: {zone: "+huge+"}\n")}, nil, "label zone: value"},
		{"label key with a space", []string{"--label", "my zone=a"}, nil, `label key "my zone" is not [prefix/]name`},
	}
	table := []string{"| mistake | exit code | message |", "|---|---|---|"}
	for _, r := range rows {
		t.Run(r.mistake, func(t *testing.T) {
			args := append([]string{"--listen", "127.0.0.1:0"}, r.args...)
			res := e2e.Run(t, r.env, bin, args...)
			var msg string
			for _, line := range strings.Split(res.Stderr, "\n") {
				if strings.HasPrefix(line, "tinyhost: ") {
					msg = line
				}
			}
			if len(msg) > 240 {
				msg = msg[:240] + "…"
			}
			table = append(table, fmt.Sprintf("| %s | %d | `%s` |", r.mistake, res.Code, msg))
			assert.Equal(t, 2, res.Code, "exit code; stderr:\n%.2000s", res.Stderr)
			assert.Contains(t, res.Stderr, r.want)
		})
	}
	t.Log("\n" + strings.Join(table, "\n"))
}

// TestTLSRenewalRefused: a certificate renewed in place with one that has
// expired is refused with a warning, and the host goes on presenting the
// one it had.
func TestTLSRenewalRefused(t *testing.T) {
	ca := e2e.NewCA(t, "tinyhost CA")
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	start := time.Now().Add(-time.Hour)
	cert, key := ca.Issue(t, e2e.Leaf{Name: "good", IPs: []string{"127.0.0.1"}, Server: true})
	e2e.Install(t, cert, key, certPath, keyPath, start)
	h := e2e.StartHost(t, e2e.HostOptions{Args: []string{"--tls-cert", certPath, "--tls-key", keyPath}})
	roots, err := hostclient.CertPool(ca.File)
	require.NoError(t, err)
	presented := func() string { return presentedName(t, h.Addr, roots) }
	assert.Equal(t, "good", presented())

	cert, key = ca.Issue(t, e2e.Leaf{Name: "expired", IPs: []string{"127.0.0.1"}, Server: true,
		NotBefore: start.Add(-48 * time.Hour), NotAfter: start.Add(-24 * time.Hour)})
	e2e.Install(t, cert, key, certPath, keyPath, start.Add(time.Minute))
	assert.Equal(t, "good", presented(), "the certificate presented after an expired renewal")
	assert.Equal(t, "good", presented())
	assert.Equal(t, 1, strings.Count(h.Log(), "renewed certificate refused: serving the previous one"), "warnings")
	assert.Contains(t, h.Log(), "expired at")
}

// TestFetchInternalAddress: the daemon fetches for whoever may load, so a
// LoadModule source or a .ref file naming an internal address (link-local:
// a cloud's metadata service; private; loopback by name) is refused
// FAILED_PRECONDITION before anything is sent, unless
// --artifacts-allow-networks holds it.
func TestFetchInternalAddress(t *testing.T) {
	h := e2e.StartHost(t, e2e.HostOptions{})
	sha := "#sha256=" + strings.Repeat("0", 64)
	for _, tc := range []struct{ source, want string }{
		{"https://169.254.169.254/latest/meta-data" + sha, "169.254.169.254, a link-local address"},
		{"https://10.0.0.1/m.wasm" + sha, "10.0.0.1, a private address"},
		{"https://localhost:1/m.wasm" + sha, "a loopback address"},
	} {
		_, err := loadSource(t, h.Addr, tc.source)
		require.Error(t, err, tc.source)
		st := status.Convert(err)
		assert.Equal(t, codes.FailedPrecondition, st.Code(), "%s: %s", tc.source, st.Message())
		assert.Contains(t, st.Message(), tc.want)
		assert.Contains(t, st.Message(), "artifacts-allow-networks")
	}
	require.NoError(t, os.WriteFile(filepath.Join(h.ModulesDir, "meta.ref"),
		[]byte("url: https://169.254.169.254/m.wasm\nsha256: "+strings.Repeat("0", 64)+"\n"), 0o644))
	require.Eventually(t, func() bool { return strings.Contains(h.Log(), "169.254.169.254, a link-local address") },
		time.Minute, 20*time.Millisecond, "the .ref file refused in the log")
}

// TestGoMemoryLimit: the daemon makes its memory budget (--max-memory-bytes,
// else the default) the Go runtime's memory limit, which its metrics show;
// GOMEMLIMIT, when set, wins.
func TestGoMemoryLimit(t *testing.T) {
	limit := func(t *testing.T, o e2e.HostOptions) string {
		o.Args = append(o.Args, "--metrics", "127.0.0.1:0")
		h := e2e.StartHost(t, o)
		body := metricsText(t, h.MetricsAddr(t))
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "go_gc_gomemlimit_bytes "); ok {
				return v
			}
		}
		t.Fatalf("no go_gc_gomemlimit_bytes in the metrics")
		return ""
	}
	assert.Equal(t, "1.073741824e+09", limit(t, e2e.HostOptions{Args: []string{"--max-memory-bytes", "1073741824"}}))
	assert.Equal(t, "5.36870912e+08", limit(t, e2e.HostOptions{Args: []string{"--max-memory-bytes", "1073741824"}, Env: []string{"GOMEMLIMIT=512MiB"}}))
	dflt, err := strconv.ParseFloat(limit(t, e2e.HostOptions{}), 64)
	require.NoError(t, err)
	assert.Equal(t, float64(host.DefaultMemoryBudget()), dflt, "no --max-memory-bytes: the default budget, 3/4 of the memory the host has")
}

// metricsText is the text of the /metrics at addr.
func metricsText(t *testing.T, addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
