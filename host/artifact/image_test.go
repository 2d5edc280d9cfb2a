package artifact_test

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/stretchr/testify/assert"

	"github.com/tinyhost/tinyhost/host/api"
)

// FuzzImageGrammar: api.Source checks an OCI reference on the standard
// library, where it enters; the registry client parses it again when it
// fetches. A reference the first accepts, the second must accept too, or
// a host would take a load it can only fail later.
func FuzzImageGrammar(f *testing.F) {
	for _, s := range []string{
		"ghcr.io/acme/hello:1.2.0",
		"hello",
		"localhost:5000/a/b:v1",
		"[::1]:5000/a@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"a:1@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"Upper/Case:1",
		"registry.test:x/a",
		"https://h/m",
		"a//b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if (api.Source{Image: s}).Validate() != nil {
			return
		}
		_, err := name.ParseReference(s)
		assert.NoError(t, err, "accepted where it enters, refused by the registry client: %q", s)
	})
}
