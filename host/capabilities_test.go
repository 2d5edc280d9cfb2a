package host_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
)

// TestCapabilityNames: a messaging grant names its target as module or
// module/component with the names' rules; the others take no target. A
// bad one fails the load, or New for the host's defaults, naming it.
func TestCapabilityNames(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	wasm := []byte("not reached: the capabilities are checked first")
	for _, tc := range []struct {
		name string
		caps []string
		err  string // "" loads
	}{
		{"unknown", []string{"files"}, `unknown capability "files" (known: log, config, timer, messaging, kv, messaging:<module>, messaging:<module>/<component>, http:<host>[:<port>], http:*.<domain>, secret:<name>)`},
		{"empty target", []string{"messaging:"}, `capability "messaging:": target module: empty`},
		{"upper case", []string{"messaging:B"}, `capability "messaging:B": target module: "B" must start with a lower-case letter`},
		{"port", []string{"messaging:a/b/in"}, `capability "messaging:a/b/in": target "a/b/in": want module or module/component`},
		{"empty component", []string{"messaging:a/"}, `capability "messaging:a/": target component: empty`},
		{"long", []string{"messaging:" + strings.Repeat("m", abi.MaxNameLen+1)}, "is longer than 63 bytes"},
		{"system port style", []string{"messaging:a/_x"}, `"_x" must start with a lower-case letter`},
		{"target of log", []string{"log:a"}, `capability "log:a": log takes no target, only messaging, http and secret do`},
		{"http without host", []string{"http"}, `capability "http" names no host`},
		{"http bad host", []string{"http:exa_mple.com"}, `capability "http:exa_mple.com": host "exa_mple.com"`},
		{"http bad port", []string{"http:example.com:0"}, `capability "http:example.com:0": port "0"`},
		{"http URL", []string{"http:https://example.com"}, `capability "http:https://example.com"`},
		{"secret without name", []string{"secret"}, `capability "secret" names no secret`},
		{"secret bad name", []string{"secret:A"}, `capability "secret:A": secret name`},
		{"target of timer", []string{"timer:a"}, `capability "timer:a": timer takes no target`},
		{"target of kv", []string{"kv:other"}, `capability "kv:other": kv takes no target`},
		{"several", []string{"messaging:a", "messaging:B", "files"}, `"messaging:B"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.Load(loadCtx(t), wasm, host.LoadOptions{Name: "m", Capabilities: tc.caps})
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.err)
		})
	}
	_, err := host.New(t.Context(), host.Options{DefaultCapabilities: []string{"messaging:a/b/c"}})
	assert.ErrorContains(t, err, `DefaultCapabilities: capability "messaging:a/b/c"`)
}

// TestMessagingGrants loads the hostcalls guest as module "caller" with
// each kind of messaging grant and sends and calls modules a and b (local)
// and c (on another host): a target not granted is denied, status 3, with
// a reason naming the module, the target and the grants, and logged by the
// host; nothing reaches the other host for it. Grants add up; plain
// messaging reaches every target.
func TestMessagingGrants(t *testing.T) {
	a, _, sinkA, _, tr := twoHosts(t, host.Options{}, map[string]string{"a": "echo", "b": "echo"}, map[string]string{"c": "echo"})
	const notGranted = "capability messaging is not granted"
	for _, tc := range []struct {
		name string
		caps []string
		// allowed are the targets granted; each other one of a/echo,
		// a/other, b/echo, c/echo is denied with denied as the reason's tail.
		allowed []string
		denied  string
	}{
		{"none", []string{}, nil, notGranted},
		{"log and config", []string{abi.CapLog, abi.CapConfig}, nil, notGranted},
		{"timer", []string{abi.CapTimer}, nil, notGranted},
		{"module a", []string{"messaging:a"}, []string{"a/echo", "a/other"}, "granted messaging:a"},
		{"component a/echo", []string{"messaging:a/echo"}, []string{"a/echo"}, "granted messaging:a/echo"},
		{"remote module c", []string{"messaging:c"}, []string{"c/echo"}, "granted messaging:c"},
		{"they add up", []string{"messaging:a/echo", "messaging:c"}, []string{"a/echo", "c/echo"}, "granted messaging:a/echo, messaging:c"},
		{"every target", []string{abi.CapMessaging}, []string{"a/echo", "a/other", "b/echo", "c/echo"}, ""},
		{"every target and one", []string{"messaging:b", abi.CapMessaging}, []string{"a/echo", "a/other", "b/echo", "c/echo"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := load(t, a, "hostcalls", host.LoadOptions{Name: "caller", Capabilities: tc.caps})
			assert.ElementsMatch(t, tc.caps, info.Capabilities, "listed as granted")
			for _, to := range []string{"a/echo", "a/other", "b/echo", "c/echo"} {
				for _, port := range []string{"call", "send"} {
					carried := len(tr.messages())
					denials := countLogs(sinkA, "caller", "message denied")
					resp, err := invoke(t, a, "caller", "caller", port, []byte(to+"/in hi"))
					switch {
					case !slices.Contains(tc.allowed, to):
						want := port + `: status 3: module "caller" may not message ` + to + ": " + tc.denied
						var ce *api.CallError
						if assert.ErrorAs(t, err, &ce, "%s %s", port, to) {
							assert.Equal(t, want, ce.Err.Error())
						}
						assert.Len(t, tr.messages(), carried, "%s %s: nothing is routed", port, to)
						assert.Equal(t, denials+1, countLogs(sinkA, "caller", "message denied"), "%s %s: the host logs it", port, to)
						assert.True(t, loggedWith(sinkA, "caller", hclog.Warn, strings.TrimPrefix(want, port+": status 3: ")), "%s %s: the log names it", port, to)
					case to == "a/other" && port == "call":
						// Granted: past the grant, the host finds no such
						// component (a send learns it on delivery).
						assert.ErrorContains(t, err, "status 2", "%s %s", port, to)
					case port == "call":
						require.NoError(t, err, "%s %s", port, to)
						assert.Equal(t, "hi", string(resp.Payload))
					default:
						assert.NoError(t, err, "%s %s", port, to)
					}
					if slices.Contains(tc.allowed, to) {
						assert.Equal(t, denials, countLogs(sinkA, "caller", "message denied"), "%s %s: granted, not logged", port, to)
					}
				}
			}
		})
	}
}

// TestTimerGrant: setting a timer needs the timer capability.
func TestTimerGrant(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "hostcalls", host.LoadOptions{Capabilities: []string{abi.CapLog, abi.CapConfig, abi.CapMessaging}})
	_, err := invoke(t, h, "hostcalls", "caller", "timer", []byte("1000"))
	assert.ErrorContains(t, err, "timer: status 3: capability timer is not granted")

	load(t, h, "hostcalls", host.LoadOptions{Capabilities: []string{abi.CapTimer}})
	_, err = invoke(t, h, "hostcalls", "caller", "timer", []byte("1000"))
	assert.NoError(t, err)
}

// loggedWith reports whether the module logged a line at level whose
// fields contain s.
func loggedWith(sink *logSink, module string, level hclog.Level, s string) bool {
	for _, l := range sink.of(module) {
		if l.level == level && strings.Contains(l.fields, s) {
			return true
		}
	}
	return false
}

// TestForwardPortName: a send or call to a port no component can declare
// (abi.ValidName) is refused as a bad request naming the port, before it
// is routed; a system port is refused as denied, as before.
func TestForwardPortName(t *testing.T) {
	h, _ := newHost(t, host.Options{})
	load(t, h, "echo", host.LoadOptions{Name: "a"})
	load(t, h, "hostcalls", host.LoadOptions{Name: "caller", Capabilities: []string{abi.CapMessaging}})
	for _, port := range []string{"call", "send"} {
		for _, bad := range []string{"In", "in\x1b[31m", "9in"} {
			_, err := invoke(t, h, "caller", "caller", port, []byte("a/echo/"+bad+" hi"))
			var ce *api.CallError
			if assert.ErrorAs(t, err, &ce, "%s %q", port, bad) {
				assert.Contains(t, ce.Err.Error(), fmt.Sprintf("%s: status %d: %s: port: ", port, abi.StatusBadRequest, port), "%s %q", port, bad)
				assert.NotContains(t, ce.Err.Error(), "\x1b", "%s %q", port, bad)
			}
		}
		_, err := invoke(t, h, "caller", "caller", port, []byte("a/echo/_settings hi"))
		assert.ErrorContains(t, err, fmt.Sprintf("status %d", abi.StatusDenied), "%s to a system port", port)
	}
}
