package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/cmd/tinyctl/internal/cli"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/artifact"
	"github.com/tinyhost/tinyhost/host/cluster"
	"github.com/tinyhost/tinyhost/host/server"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// startHost serves a host with hello and hostcalls on 127.0.0.1:0. Its
// fetches may reach loopback, where the tests' registries are.
func startHost(t *testing.T) (*host.Host, string) {
	t.Helper()
	ctx := t.Context()
	fetcher, err := artifact.New(artifact.Options{RestrictNetworks: true, AllowNetworks: []string{"127.0.0.0/8"}})
	require.NoError(t, err)
	h, err := host.New(ctx, host.Options{CacheDir: e2e.CacheDir(t), Fetcher: fetcher})
	require.NoError(t, err)
	// Minutes: the loads compile, on a machine that may be busy.
	lctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	_, err = h.Load(lctx, e2e.WasmBytes(t, e2e.Hello), host.LoadOptions{})
	require.NoError(t, err)
	_, err = h.Load(lctx, e2e.Guest(t, "hostcalls"), host.LoadOptions{})
	require.NoError(t, err)

	return h, serve(t, h, server.Options{Name: "test-host", Labels: map[string]string{"zone": "a"}})
}

// serve serves h on 127.0.0.1:0 until the test ends, then closes it, and
// returns the address.
func serve(t *testing.T, h *host.Host, opts server.Options) string {
	t.Helper()
	srv, err := server.New(h, opts)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		h.Close(context.WithoutCancel(t.Context()))
	})
	return lis.Addr().String()
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Run(ctx, args, cli.Env{
		Stdin:  strings.NewReader(stdin),
		Stdout: &stdout,
		Stderr: &stderr,
		Getenv: func(k string) string { return env[k] },
	})
	return result{code, stdout.String(), stderr.String()}
}

func TestCommands(t *testing.T) {
	_, addr := startHost(t)
	env := map[string]string{"TINYCTL_ADDR": addr}
	reqFile := filepath.Join(t.TempDir(), "req.json")
	require.NoError(t, os.WriteFile(reqFile, []byte(`{"name":"Grace"}`), 0o644))

	for _, tc := range []struct {
		name   string
		env    map[string]string
		stdin  string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"call", env, "", []string{"call", "hello/greeter", `{"name":"Ada"}`}, cli.ExitOK, []string{`{"greeting":"Hello, Ada!"}` + "\n"}, nil},
		{"call with port", env, "", []string{"call", "hello/greeter/in", `{"name":"Ada"}`}, cli.ExitOK, []string{"Hello, Ada!"}, nil},
		{"call @file", env, "", []string{"call", "hello/greeter", "@" + reqFile}, cli.ExitOK, []string{"Hello, Grace!"}, nil},
		{"call stdin", env, `{"name":"Linus"}`, []string{"call", "hello/greeter", "-"}, cli.ExitOK, []string{"Hello, Linus!"}, nil},
		{"flags after arguments", env, "", []string{"call", "hello/greeter", `{"name":"Ada"}`, "--timeout", "5s"}, cli.ExitOK, []string{"Hello, Ada!"}, nil},
		{"addr flag wins over env", map[string]string{"TINYCTL_ADDR": "127.0.0.1:1"}, "", []string{"--addr", addr, "call", "hello/greeter", `{"name":"Ada"}`}, cli.ExitOK, []string{"Hello, Ada!"}, nil},
		{"handler error", env, "", []string{"call", "hello/greeter", `{}`}, cli.ExitFailed, nil, []string{"tinyctl: UNKNOWN: ", `"name" is missing`}},
		{"unknown module", env, "", []string{"call", "nope/greeter"}, cli.ExitNotFound, nil, []string{"tinyctl: NOT_FOUND: ", `"nope"`}},
		{"unknown component", env, "", []string{"call", "hello/nobody"}, cli.ExitNotFound, nil, []string{"tinyctl: NOT_FOUND: ", "nobody"}},
		{"unknown port", env, "", []string{"call", "hello/greeter/nowhere"}, cli.ExitNotFound, nil, []string{"tinyctl: NOT_FOUND: ", "nowhere"}},
		{"unreachable", map[string]string{"TINYCTL_ADDR": "127.0.0.1:1"}, "", []string{"call", "hello/greeter"}, cli.ExitUnavailable, nil, []string{"tinyctl: UNAVAILABLE: "}},
		{"bad target", env, "", []string{"call", "hello"}, cli.ExitUsage, nil, []string{`"hello" is not MODULE/COMPONENT[/PORT]`, "--help"}},
		{"too many arguments", env, "", []string{"call", "a/b", "{}", "{}"}, cli.ExitUsage, nil, []string{"at most one payload"}},
		{"unknown command", env, "", []string{"frobnicate"}, cli.ExitUsage, nil, []string{`unknown command "frobnicate"`}},
		{"unknown flag", env, "", []string{"list", "--frob"}, cli.ExitUsage, nil, []string{"unknown flag: --frob"}},
		{"bad output", env, "", []string{"list", "-o", "yaml"}, cli.ExitUsage, nil, []string{"text or json"}},
		{"bad env", map[string]string{"TINYCTL_TIMEOUT": "soon"}, "", []string{"list"}, cli.ExitUsage, nil, []string{"TINYCTL_TIMEOUT"}},
		{"no command", env, "", nil, cli.ExitUsage, nil, []string{"Usage:"}},
		{"list", env, "", []string{"list"}, cli.ExitOK, []string{"NAME", "hello", "0.1.0", "greeter", "hostcalls"}, nil},
		{"info", env, "", []string{"info"}, cli.ExitOK, []string{"test-host", "zone=a", "v1", "hello"}, nil},
		{"unload unknown", env, "", []string{"unload", "nope"}, cli.ExitNotFound, nil, []string{"tinyctl: NOT_FOUND: ", `"nope"`}},
		{"help", nil, "", []string{"--help"}, cli.ExitOK, []string{"Exit codes:", "tinyctl call hello/greeter", "TINYCTL_ADDR"}, nil},
		{"help call", nil, "", []string{"help", "call"}, cli.ExitOK, []string{"Examples:", "@request.json"}, nil},
		{"call --help", nil, "", []string{"call", "--help"}, cli.ExitOK, []string{"Examples:", "--meta"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, tc.env, tc.stdin, tc.args...)
			assert.Equal(t, tc.code, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
			for _, w := range tc.stdout {
				assert.Contains(t, res.stdout, w)
			}
			for _, w := range tc.stderr {
				assert.Contains(t, res.stderr, w)
			}
			if tc.code != cli.ExitOK && tc.name != "no command" {
				assert.True(t, strings.HasPrefix(res.stderr, "tinyctl: "), "stderr: %s", res.stderr)
			}
		})
	}
}

func TestCallJSON(t *testing.T) {
	_, addr := startHost(t)
	env := map[string]string{"TINYCTL_ADDR": addr}

	res := run(t, env, "", "call", "hostcalls/caller/emit", `{"n":1}`, "-o", "json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var out struct {
		Reply   any `json:"reply"`
		Emitted []struct {
			Module, Component, Port string
			Payload                 json.RawMessage
		} `json:"emitted"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out), res.stdout)
	assert.Equal(t, "ok", out.Reply, "a reply that is not JSON is a string")
	require.Len(t, out.Emitted, 1)
	assert.Equal(t, "caller", out.Emitted[0].Component)
	assert.Equal(t, "out", out.Emitted[0].Port)
	assert.JSONEq(t, `{"n":1}`, string(out.Emitted[0].Payload))

	res = run(t, env, "", "call", "hello/greeter", `{"name":"Ada"}`, "-o", "json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	assert.JSONEq(t, `{"reply":{"greeting":"Hello, Ada!"},"emitted":[]}`, res.stdout)

	res = run(t, env, "", "list", "-o", "json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var list struct{ Modules []struct{ Name string } }
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &list), res.stdout)
	assert.Len(t, list.Modules, 2)
}

func TestLoadUnloadWatch(t *testing.T) {
	h, addr := startHost(t)
	env := map[string]string{"TINYCTL_ADDR": addr}
	hello := e2e.Wasm(t, e2e.Hello)

	// watch runs until its context ends, printing events as they come.
	wctx, stopWatch := context.WithCancel(t.Context())
	var wout, werr e2e.LogBuffer
	watched := make(chan int, 1)
	go func() {
		watched <- cli.Run(wctx, []string{"watch"}, cli.Env{Stdout: &wout, Stderr: &werr, Getenv: func(k string) string { return env[k] }})
	}()
	require.Eventually(t, func() bool { return strings.Count(wout.String(), "LOADED") == 2 }, 10*time.Second, 5*time.Millisecond,
		"watch lists the loaded modules: %s", wout.String())

	res := run(t, env, "", "load", hello, "--max-instances", "2", "--call-timeout", "3s", "--idle-timeout", "90s",
		"--http-timeout", "4s", "--http-max-response-bytes", "4096", "--http-max-redirects", "-1", "--http-max-requests", "3",
		"--kv-max-key-bytes", "100", "--kv-max-bytes", "1048576")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "upgraded hello 0.1.0 (sha256:")
	info, _ := h.Module("hello")
	assert.Equal(t, 90*time.Second, info.Limits.IdleTimeout)
	assert.Equal(t, 4*time.Second, info.Limits.HTTPTimeout)
	assert.Equal(t, 4096, info.Limits.MaxHTTPResponseSize)
	assert.Equal(t, -1, info.Limits.MaxHTTPRedirects)
	assert.Equal(t, 3, info.Limits.MaxHTTPRequests)
	assert.Equal(t, 100, info.Limits.MaxKVKeySize)
	assert.Equal(t, int64(1<<20), info.Limits.MaxKVBytes)
	res = run(t, env, "", "call", "hello/greeter", `{"name":"Ada"}`)
	assert.Equal(t, cli.ExitOK, res.code, res.stderr)
	res = run(t, env, "", "list")
	assert.Contains(t, res.stdout, "0/1/2", "the new limits are in force")
	res = run(t, env, "", "load", hello, "--name", "hola")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "loaded hola 0.1.0")
	info, _ = h.Module("hola")
	assert.ElementsMatch(t, []string{"log", "config"}, info.Capabilities, "no --cap: the host's defaults")
	res = run(t, env, "", "load", hello, "--name", "hola", "--cap", "none")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	info, _ = h.Module("hola")
	assert.Empty(t, info.Capabilities, "--cap none grants none")
	res = run(t, env, "", "load", hello, "--name", "hola", "--cap", "timer", "--label", "team=payments", "--label", "stage=canary")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	info, _ = h.Module("hola")
	assert.Equal(t, []string{"timer"}, info.Capabilities)
	assert.Equal(t, map[string]string{"team": "payments", "stage": "canary"}, info.Labels, "--label notes kept with the module")
	res = run(t, env, "", "load", hello, "--name", "hola", "--cap", "messaging:hello", "--cap", "messaging:common/split")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	info, _ = h.Module("hola")
	assert.Equal(t, []string{"messaging:hello", "messaging:common/split"}, info.Capabilities, "messaging grants that name their targets")
	res = run(t, env, "", "load", hello, "--name", "hola", "--cap", "none", "--cap", "log")
	assert.Equal(t, cli.ExitUsage, res.code)
	assert.Contains(t, res.stderr, "--cap none grants nothing and goes alone")
	res = run(t, env, "", "unload", "hola")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	res = run(t, env, "", "call", "hola/greeter", `{"name":"Ada"}`)
	assert.Equal(t, cli.ExitNotFound, res.code, res.stderr)

	junk := filepath.Join(t.TempDir(), "junk.wasm")
	require.NoError(t, os.WriteFile(junk, []byte("junk"), 0o644))
	res = run(t, env, "", "load", junk, "--name", "junk")
	assert.Equal(t, cli.ExitFailed, res.code)
	assert.Contains(t, res.stderr, "tinyctl: INVALID_ARGUMENT: ")
	res = run(t, env, "", "load", filepath.Join(t.TempDir(), "missing.wasm"))
	assert.Equal(t, cli.ExitFailed, res.code)
	res = run(t, env, "", "load", hello, "--config", "[1]")
	assert.Equal(t, cli.ExitUsage, res.code)
	assert.Contains(t, res.stderr, "not a JSON object")

	require.Eventually(t, func() bool {
		out := wout.String()
		return strings.Contains(out, "UPGRADED hello") && strings.Contains(out, "UNLOADED hola") && strings.Contains(out, "FAILED   junk")
	}, 10*time.Second, 5*time.Millisecond, "watch shows the events: %s", wout.String())
	stopWatch()
	assert.Equal(t, cli.ExitOK, <-watched, werr.String())
}

func TestBuild(t *testing.T) {
	root := e2e.Root(t)
	out := filepath.Join(t.TempDir(), "hello.wasm")
	res := run(t, nil, "", "build", filepath.Join(root, "examples", "hello"), "-o", out)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "built "+out)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, []byte("\x00asm"), b[:4])

	for _, tc := range []struct {
		dir  string
		want string
	}{
		{filepath.Join(root, "abi"), "is not a component: package abi is not a main package"},
		{filepath.Join(root, "cmd", "tinyctl"), "does not import github.com/tinyhost/tinyhost/sdk"},
		{filepath.Join(root, "nonexistent"), "is not a directory"},
		{t.TempDir(), "is not a component"},
	} {
		res := run(t, nil, "", "build", tc.dir, "-o", filepath.Join(t.TempDir(), "x.wasm"))
		assert.Equal(t, cli.ExitFailed, res.code, "build %s: %s", tc.dir, res.stderr)
		assert.Contains(t, res.stderr, tc.want, "build %s", tc.dir)
	}
}

// TestLoadMinInstances: --min-instances 0 keeps no instance warm, and a
// call still answers; without the flag the host's default, one, holds.
func TestLoadMinInstances(t *testing.T) {
	h, addr := startHost(t)
	env := map[string]string{"TINYCTL_ADDR": addr}
	hello := e2e.Wasm(t, e2e.Hello)

	res := run(t, env, "", "load", hello, "--name", "cold", "--min-instances", "0", "--idle-timeout", "50ms")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	info, _ := h.Module("cold")
	require.NotNil(t, info.Limits.MinInstances)
	assert.Equal(t, 0, *info.Limits.MinInstances, "--min-instances 0 is sent as 0")
	require.Eventually(t, func() bool {
		info, _ := h.Module("cold")
		return info.Pool.Instances == 0
	}, time.Minute, 10*time.Millisecond, "the idle module keeps no instance")
	res = run(t, env, "", "call", "cold/greeter", `{"name":"Ada"}`)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "Ada")

	res = run(t, env, "", "load", hello, "--name", "warm")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	info, _ = h.Module("warm")
	assert.Equal(t, 1, *info.Limits.MinInstances, "no flag: the host's default")
	assert.Equal(t, 1, info.Pool.Instances)

	res = run(t, env, "", "load", hello, "--name", "warm", "--min-instances", "-1")
	assert.Equal(t, cli.ExitUsage, res.code)
	assert.Contains(t, res.stderr, `"-1" is not a count`)
}

// TestRoutesNamespace: tinyctl routes shows a route's namespace beside its
// hosts, as -o json does.
func TestRoutesNamespace(t *testing.T) {
	ctx := t.Context()
	h, err := host.New(ctx, host.Options{Transport: cluster.New(cluster.Options{})})
	require.NoError(t, err)
	require.NoError(t, h.SetRouteTable(3, map[string]api.Route{
		"billing": {Addrs: []string{"127.0.0.1:7001"}, Namespace: "team-a"},
		"common":  {Addrs: []string{"127.0.0.1:7002"}},
	}))
	env := map[string]string{"TINYCTL_ADDR": serve(t, h, server.Options{Routing: h})}

	r := run(t, env, "", "routes")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	assert.Contains(t, lines[0], "(generation 3)")
	assert.Regexp(t, `^billing\s+127\.0\.0\.1:7001 \(namespace team-a\)`, lines[1])
	assert.Regexp(t, `^common\s+127\.0\.0\.1:7002\s*$`, lines[2])

	r = run(t, env, "", "routes", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	// protojson varies its spacing from build to build: read it as JSON.
	var table struct {
		Routes []struct{ Module, Namespace string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &table), r.stdout)
	require.Len(t, table.Routes, 2, r.stdout)
	assert.Equal(t, "billing", table.Routes[0].Module)
	assert.Equal(t, "team-a", table.Routes[0].Namespace)
	assert.Empty(t, table.Routes[1].Namespace)
}
