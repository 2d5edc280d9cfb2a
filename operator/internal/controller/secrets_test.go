package controller

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestModuleSecrets: a TinyModule's spec.secrets reach its component (the
// common module's http component sends the secret as a bearer token to a
// loopback server, which answers what it got), and its spec.limits' HTTP
// limits reach the host; the Secret updated, the module sends the new
// value without a reload (same digest and load time); a TinyModule naming
// a Secret that does not exist is not Ready, its condition naming the
// Secret, until the Secret is created; one naming a secret it is not
// granted is refused by the schema. No value appears in the operator's or
// the host's log, the host's metrics, the TinyModules' and TinyHosts'
// status, the namespace's events, or the host's ListModules and Info.
func TestModuleSecrets(t *testing.T) {
	b := newBed(t, hostSpec{name: "h1", args: []string{"--metrics", "127.0.0.1:0"}})
	ctx := t.Context()
	first, second, third := "first-"+rand.Text(), "second-"+rand.Text(), "third-"+rand.Text()

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("Authorization"))
	}))
	t.Cleanup(api.Close)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api"}, Data: map[string][]byte{"token": []byte(first)}}
	require.NoError(t, b.c.Create(ctx, sec))

	secrets := []v1alpha1.SecretRef{{Name: "token", SecretKeyRef: v1alpha1.SecretKeySelector{Name: "api", Key: "token"}}}
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "caller"}, Spec: v1alpha1.TinyModuleSpec{
		Image:        b.comm.Ref,
		Capabilities: []v1alpha1.Capability{"log", "config", v1alpha1.Capability("http:" + api.Listener.Addr().String()), "secret:token"},
		Config:       &runtime.RawExtension{Raw: []byte(`{"http":{"url":"` + api.URL + `/","secret":"token"}}`)},
		Secrets:      secrets,
		Limits: &v1alpha1.Limits{HTTPTimeout: &metav1.Duration{Duration: 4 * time.Second}, HTTPMaxResponseBytes: ptr(int32(4096)),
			HTTPMaxRedirects: ptr(int32(-1)), HTTPMaxRequests: ptr(int32(3))},
	}})
	tm := b.ready(t, "default", "caller", 2*time.Minute)
	addr := readyAddr(tm)
	call := func() (string, error) {
		out, err := invoke(ctx, t, addr, "caller", "http", `{}`)
		if err != nil {
			return "", err
		}
		var resp struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			return "", fmt.Errorf("reply %q: %w", out, err)
		}
		return resp.Body, nil
	}
	got, err := call()
	require.NoError(t, err)
	assert.Equal(t, "Bearer "+first, got, "the Secret's value, delivered with the load")
	loaded := func() *hostv1.Module {
		resp, err := b.hosts["h1"].Client.ListModules(ctx, &hostv1.ListModulesRequest{})
		require.NoError(t, err)
		for _, m := range resp.GetModules() {
			if m.GetName() == "caller" {
				return m
			}
		}
		t.Fatal("caller is not loaded on h1")
		return nil
	}
	before := loaded()
	// The module's own HTTP limits, from spec.limits.
	l := before.GetLimits()
	assert.Equal(t, uint32(4000), l.GetHttpTimeoutMs())
	assert.Equal(t, uint32(4096), l.GetMaxHttpResponseBytes())
	assert.Equal(t, int32(-1), l.GetMaxHttpRedirects())
	assert.Equal(t, uint32(3), l.GetMaxHttpRequests())

	eventually(t, 10*time.Second, "an update of the Secret", func() error {
		var s corev1.Secret
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(sec), &s); err != nil {
			return err
		}
		s.Data["token"] = []byte(second)
		return b.c.Update(ctx, &s)
	})
	eventually(t, time.Minute, "the rotated value in the module", func() error {
		got, err := call()
		if err != nil {
			return err
		}
		if got != "Bearer "+second {
			return fmt.Errorf("the module sends %q", got)
		}
		return nil
	})
	after := loaded()
	assert.Equal(t, before.GetDigest(), after.GetDigest())
	assert.Equal(t, before.GetLoadedAtUnixNano(), after.GetLoadedAtUnixNano(), "not reloaded")

	// A Secret that does not exist: not Ready, and the condition says which.
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "lacking"}, Spec: v1alpha1.TinyModuleSpec{
		Image:        b.hello.Ref,
		Capabilities: []v1alpha1.Capability{"log", "config", "secret:token"},
		Secrets:      []v1alpha1.SecretRef{{Name: "token", SecretKeyRef: v1alpha1.SecretKeySelector{Name: "absent", Key: "token"}}},
	}})
	var cond *metav1.Condition
	eventually(t, time.Minute, "lacking's Ready condition to name the Secret", func() error {
		m := b.module(t, "default", "lacking")
		cond = meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionReady)
		if cond == nil || !strings.Contains(cond.Message, "Secret default/absent does not exist") {
			return fmt.Errorf("status %s", brief(m))
		}
		return nil
	})
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	t.Logf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	// Created, the Secret lets the module load.
	require.NoError(t, b.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "absent"}, Data: map[string][]byte{"token": []byte(third)}}))
	b.ready(t, "default", "lacking", time.Minute)

	// A secret not granted: the schema refuses it.
	err = b.c.Create(ctx, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ungranted"}, Spec: v1alpha1.TinyModuleSpec{
		Image: b.hello.Ref, Secrets: secrets,
	}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "every spec.secrets name must be granted in spec.capabilities as secret:<name>")

	// Where the values must not be.
	var events eventsv1.EventList
	require.NoError(t, b.c.List(ctx, &events, client.InNamespace("default")))
	var mods v1alpha1.TinyModuleList
	require.NoError(t, b.c.List(ctx, &mods, client.InNamespace("default")))
	list, err := b.hosts["h1"].Client.ListModules(ctx, &hostv1.ListModulesRequest{})
	require.NoError(t, err)
	info, err := b.hosts["h1"].Client.Info(ctx, &hostv1.InfoRequest{})
	require.NoError(t, err)
	var hosts v1alpha1.TinyHostList
	require.NoError(t, b.c.List(ctx, &hosts))
	places := map[string]string{
		"the host's metrics": scrapeMetrics(t, b.hosts["h1"].Log()),
		"the operator's log": b.mgr.Logs(),
		"the host's log":     b.hosts["h1"].Log(),
		"ListModules":        list.String(),
		"Info":               info.String(),
	}
	for what, obj := range map[string]any{"the TinyModules": mods.Items, "the events": events.Items, "the TinyHosts": hosts.Items} {
		j, err := json.Marshal(obj)
		require.NoError(t, err)
		places[what] = string(j)
	}
	for what, text := range places {
		require.NotEmpty(t, text, what)
		for _, v := range []string{first, second, third} {
			assert.NotContains(t, text, v, what)
		}
	}
	t.Logf("searched %d places (%d bytes of operator log, %d of host log, %d events) for the three values", len(places), len(places["the operator's log"]), len(places["the host's log"]), len(events.Items))
}

// scrapeMetrics reads the host's /metrics, at the address its log names.
func scrapeMetrics(t *testing.T, log string) string {
	t.Helper()
	var addr string
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Message string `json:"@message"`
			Addr    string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Message == "serving metrics" {
			addr = rec.Addr
		}
	}
	require.NotEmpty(t, addr, "the metrics address in the host's log")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(b), `module="caller"`, "the module's metrics")
	return string(b)
}
