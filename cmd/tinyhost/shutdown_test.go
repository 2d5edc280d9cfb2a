package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/daemon"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

// startSpinning starts a host with the abitest guest "loop" and extra
// flags, and a call to its spin port, which loops for as long as its
// call timeout allows; it returns once the call runs.
func startSpinning(t *testing.T, args ...string) (*e2e.Host, <-chan error) {
	t.Helper()
	loop := filepath.Join(t.TempDir(), "loop.wasm")
	require.NoError(t, os.WriteFile(loop, e2e.Guest(t, "loop"), 0o644))
	h := e2e.StartHost(t, e2e.HostOptions{Modules: []string{loop}, Args: append([]string{"--call-timeout", "1h", "--maximum-call-timeout", "1h"}, args...)})
	c := client(t, h.Addr)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	spun := make(chan error, 1)
	go func() {
		_, err := c.Invoke(ctx, &hostv1.InvokeRequest{Module: "loop", Component: "spinner", Port: "spin"})
		spun <- err
	}()
	require.Eventually(t, func() bool {
		list, err := c.ListModules(ctx, &hostv1.ListModulesRequest{})
		return err == nil && len(list.GetModules()) == 1 && list.GetModules()[0].GetPool().GetInUse() >= 1
	}, time.Minute, 10*time.Millisecond, "the spinning call runs")
	return h, spun
}

// dripServer serves an e2e.Drip on 127.0.0.1.
func dripServer(t *testing.T) (*httptest.Server, *e2e.Drip) {
	d := e2e.NewDrip()
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return srv, d
}

// TestShutdownBounded: SIGTERM while a guest loops in a call (whose call
// timeout is an hour) and the modules directory fetches a .ref from a
// server that drips one byte a second (fetch timeout an hour): the daemon
// interrupts both at its shutdown timeout and exits 0 within that timeout
// plus daemon.ShutdownSlack.
func TestShutdownBounded(t *testing.T) {
	const shutdownTimeout = 2 * time.Second
	drip, dripper := dripServer(t)
	h, spun := startSpinning(t,
		"--shutdown-timeout", shutdownTimeout.String(),
		"--artifacts-plain-http", strings.TrimPrefix(drip.URL, "http://"),
		"--artifacts-fetch-timeout", "1h")
	sum := sha256.Sum256([]byte("never"))
	ref := "url: " + drip.URL + "/m.wasm\nsha256: " + hex.EncodeToString(sum[:]) + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(h.ModulesDir, "drip.ref"), []byte(ref), 0o644))
	select {
	case <-dripper.Started():
	case <-time.After(time.Minute):
		t.Fatal("the host did not fetch drip.ref")
	}

	start := time.Now()
	h.Signal(t, syscall.SIGTERM)
	code := h.Wait(t, shutdownTimeout+daemon.ShutdownSlack)
	t.Logf("exited with code %d %v after SIGTERM (shutdown timeout %v)", code, time.Since(start).Round(time.Millisecond), shutdownTimeout)
	assert.Equal(t, 0, code)
	assert.Contains(t, h.Log(), `"@message":"stopped"`)
	assert.Error(t, <-spun, "the spinning call was answered")
	require.Eventually(t, func() bool { return dripper.Active() == 0 }, time.Minute, 10*time.Millisecond,
		"the fetch's connection outlived the daemon")
}

// TestSecondSignal: a second SIGTERM or SIGINT during a shutdown that would
// take an hour (a guest loops in a call with an hour's call timeout, the
// shutdown timeout is an hour) exits at once with code 1, saying so.
func TestSecondSignal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second syscall.Signal
	}{
		{"SIGTERM", syscall.SIGTERM},
		{"SIGINT", syscall.SIGINT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := startSpinning(t, "--shutdown-timeout", "1h")
			h.Signal(t, syscall.SIGTERM)
			require.Eventually(t, func() bool { return strings.Contains(h.Log(), "shutting down") }, time.Minute, 10*time.Millisecond)
			h.Signal(t, tc.second)
			code := h.Wait(t, daemon.ShutdownSlack)
			assert.Equal(t, 1, code)
			assert.Contains(t, h.Log(), `"@message":"second signal: exiting at once, without finishing the shutdown"`)
			assert.Contains(t, h.Log(), `"signal":"`+tc.second.String()+`"`)
		})
	}
}
