package api_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/api"
)

// FuzzParseSource: any string either fails with ErrInvalidSource or gives a
// valid Source that survives its one-string and reference-file forms. Seeds
// beyond these are in testdata/fuzz/FuzzParseSource.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{
		"ghcr.io/acme/hello:1.2.0",
		"localhost:5000/hello@sha256:" + hexA,
		"https://example.com/m.wasm#sha256=" + hexA,
		"oci://ghcr.io/a:1#sha256:" + hexB,
		"http://[::1]:8080/m.wasm#sha256=" + hexA,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src, err := api.ParseSource(s)
		if err != nil {
			require.ErrorIs(t, err, api.ErrInvalidSource)
			return
		}
		require.NoError(t, src.Validate())
		again, err := api.ParseSource(src.String())
		require.NoError(t, err, "String() = %q", src.String())
		assert.Equal(t, src, again)
		fromFile, err := api.ParseRefFile(src.RefFile())
		require.NoError(t, err, "RefFile() = %q", src.RefFile())
		assert.Equal(t, src, fromFile)
	})
}

// FuzzParseRefFile: any bytes either fail with ErrInvalidSource or give a
// valid Source that RefFile writes back to the same Source. Seeds beyond
// these are in testdata/fuzz/FuzzParseRefFile.
func FuzzParseRefFile(f *testing.F) {
	for _, s := range []string{
		"image: ghcr.io/acme/hello:1.2.0\n",
		"# c\nurl: https://example.com/m.wasm\nsha256: " + hexA + "\n",
		"image: 'localhost:5000/a:1' # x\nsha256: \"sha256:" + hexB + "\"\n",
		"ghcr.io/acme/hello:1\n",
		"https://example.com/m.wasm#sha256=" + hexA,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		src, err := api.ParseRefFile(b)
		if err != nil {
			require.ErrorIs(t, err, api.ErrInvalidSource)
			return
		}
		require.NoError(t, src.Validate())
		again, err := api.ParseRefFile(src.RefFile())
		require.NoError(t, err, "RefFile() = %q", src.RefFile())
		assert.Equal(t, src, again)
	})
}
