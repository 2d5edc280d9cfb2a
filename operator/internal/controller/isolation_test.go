package controller

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// hungRegistry listens on 127.0.0.1, accepts connections and never
// answers on them: an artifact address that holds every fetch until the
// fetch's own deadline. accepted counts the connections.
func hungRegistry(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = &atomic.Int64{}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), accepted
}

// TestHungArtifact: one tenant's module whose artifact never arrives (its
// registry accepts connections and never answers) holds its own module
// Loading, saying so, and another tenant's module placed on the same host
// meanwhile becomes Ready.
func TestHungArtifact(t *testing.T) {
	b := newBed(t, hostSpec{name: "host-a"})
	namespace(t, b.c, "team-a")
	namespace(t, b.c, "team-b")
	hung, accepted := hungRegistry(t)

	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "stuck"},
		Spec: v1alpha1.TinyModuleSpec{Image: hung + "/tinyhost/stuck:0.1.0"}})
	eventually(t, time.Minute, "the host fetching stuck from the hung registry", func() error {
		if accepted.Load() == 0 {
			return fmt.Errorf("no connection yet")
		}
		return nil
	})

	start := time.Now()
	b.create(t, &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "common"}, Spec: v1alpha1.TinyModuleSpec{Image: b.comm.Ref}})
	m := b.ready(t, "team-a", "common", 2*time.Minute)
	t.Logf("team-a/common Ready %v after its creation, beside team-b/stuck's hung load", time.Since(start).Round(10*time.Millisecond))
	assert.Equal(t, []string{"host-a"}, readyOn(m))

	stuck := b.module(t, "team-b", "stuck")
	c := meta.FindStatusCondition(stuck.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, c, "%s", brief(stuck))
	assert.Equal(t, metav1.ConditionFalse, c.Status, "%s", brief(stuck))
	assert.Equal(t, reasonLoading, c.Reason, "%s", brief(stuck))
	assert.True(t, strings.Contains(c.Message, "host-a: the host has been loading it since"), "%s", c.Message)
	t.Logf("team-b/stuck: %s", c.Message)
}
