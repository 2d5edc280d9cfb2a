package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// TestWiringLeftOut: a namespace over its share is left out, then the
// largest of those that do not fit in the table; the others keep theirs.
func TestWiringLeftOut(t *testing.T) {
	wired := func(ns, name string, wires int) *v1alpha1.TinyModule {
		m := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for i := range wires {
			m.Spec.Wiring = append(m.Spec.Wiring, v1alpha1.Wire{From: fmt.Sprintf("c/p%d", i), To: "t/c/in"})
		}
		return m
	}
	one := wireBytes(wired("a", "m", 1))
	assert.Equal(t, len("m/c/p0")+len("t/c/in")+10, one)

	mods := []*v1alpha1.TinyModule{
		wired("small", "s", 1),
		wired("mid", "m1", 2), wired("mid", "m2", 2),
		wired("large", "l", 5),
		wired("huge", "h", 50),
		wired("none", "n", 0),
	}
	b := wiringBounds{perNamespace: 20 * one, total: 7 * one}
	out := wiringLeftOut(slices.Values(mods), b)
	assert.Contains(t, out["huge"], "over the")
	assert.Contains(t, out["large"], "has room for")
	assert.NotContains(t, out, "small")
	assert.NotContains(t, out, "mid")
	assert.NotContains(t, out, "none")
	assert.Len(t, out, 2)

	assert.Equal(t, "300 B", quantity(300))
	assert.Equal(t, "512 KiB", quantity(512<<10))
	assert.Equal(t, "1.1 MiB", quantity(1200640))

	// Deleted modules take nothing.
	now := metav1.Now()
	mods[4].DeletionTimestamp = &now
	out = wiringLeftOut(slices.Values(mods), b)
	assert.NotContains(t, out, "huge")
}
