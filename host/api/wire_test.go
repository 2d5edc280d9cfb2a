package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tinyhost/tinyhost/host/api"
)

// TestCheckWire: the wires a host refuses, each with the end and the
// reason named; the others pass.
func TestCheckWire(t *testing.T) {
	long := strings.Repeat("p", 64)
	for _, tt := range []struct {
		name, from, to string
		want           string // "" for a good wire
		systemPort     bool
	}{
		{"good", "a/split/out", "b/counter/in", "", false},
		{"names with '-', '_' and '.'", "a-1/c_2/out.x", "b.v2/c-d/in_1", "", false},
		{"from a system port", "a/c/_tick", "b/c/in", `wire from "a/c/_tick": port "_tick"`, true},
		{"to a system port", "a/c/out", "b/c/_settings", `wire "a/c/out" to "b/c/_settings": port "_settings"`, true},
		{"a 64-byte port", "a/c/out", "b/c/" + long, "is longer than 63 bytes", false},
		{"two parts", "a/out", "b/c/in", "want module/component/port", false},
		{"four parts", "a/c/out", "b/c/in/x", "want module/component/port", false},
		{"an upper-case module", "a/c/out", "B/c/in", "must start with a lower-case letter", false},
		{"an empty component", "a//out", "b/c/in", "component: empty", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := api.CheckWire(tt.from, tt.to)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
			assert.Equal(t, tt.systemPort, errors.Is(err, api.ErrSystemPort))
		})
	}
}
