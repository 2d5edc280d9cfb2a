package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestScaleToZero: a TinyModule with limits.minInstances 0 is Ready on a
// real host with no instance there, as `tinyctl list` shows its pool; its
// first call (`tinyctl call`) starts an instance, which answers; once that
// instance has idled out the pool is back at zero instances holding no
// linear memory, and the module is still Ready.
func TestScaleToZero(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	tinyctl := e2e.Binary(t, "cmd/tinyctl")
	b.create(t, &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: v1alpha1.TinyModuleSpec{Image: b.hello.Ref, Limits: &v1alpha1.Limits{
			MinInstances: replicas(0), IdleTimeout: &metav1.Duration{Duration: time.Second},
		}},
	})
	m := b.ready(t, "default", "hello", 2*time.Minute)
	addr := readyAddr(m)
	require.NotEmpty(t, addr, "a Ready placement's address: %s", brief(m))

	// pool is hello's pool as `tinyctl list -o json` prints it.
	pool := func() (*hostv1.Pool, error) {
		res := e2e.Run(t, nil, tinyctl, "--addr", addr, "list", "-o", "json")
		if res.Code != 0 {
			return nil, fmt.Errorf("tinyctl list: exit %d: %s", res.Code, res.Stderr)
		}
		var list hostv1.ListModulesResponse
		if err := protojson.Unmarshal([]byte(res.Stdout), &list); err != nil {
			return nil, fmt.Errorf("tinyctl list -o json: %w\n%s", err, res.Stdout)
		}
		for _, mod := range list.GetModules() {
			if mod.GetName() == "hello" {
				return mod.GetPool(), nil
			}
		}
		return nil, fmt.Errorf("hello is not listed:\n%s", res.Stdout)
	}
	// atZero holds once the pool has no instance and no linear memory.
	atZero := func() (*hostv1.Pool, error) {
		p, err := pool()
		if err != nil {
			return nil, err
		}
		if p.GetInstances() != 0 || p.GetMemoryBytes() != 0 {
			return nil, fmt.Errorf("pool: %v", p)
		}
		return p, nil
	}
	var idle *hostv1.Pool
	eventually(t, 2*time.Minute, "hello at zero instances after its load", func() (err error) {
		idle, err = atZero()
		return err
	})
	t.Logf("after the load: %v", idle)

	res := e2e.Run(t, nil, tinyctl, "--addr", addr, "call", "hello/greeter", `{"name":"Ada"}`)
	require.Zero(t, res.Code, "tinyctl call: %s%s", res.Stdout, res.Stderr)
	assert.JSONEq(t, `{"greeting":"Hello, Ada!"}`, res.Stdout)
	called, err := pool()
	require.NoError(t, err)
	assert.Greater(t, called.GetCreated(), idle.GetCreated(), "the call started an instance: %v", called)
	t.Logf("after the call: %v", called)

	var again *hostv1.Pool
	eventually(t, 2*time.Minute, "hello back at zero instances after its idle timeout", func() (err error) {
		again, err = atZero()
		return err
	})
	assert.Equal(t, called.GetCreated(), again.GetCreated(), "no instance started while idle")
	t.Logf("idled out: %v", again)
	m = b.module(t, "default", "hello")
	assert.True(t, meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.ConditionReady), "Ready at zero instances: %s", brief(m))
}
