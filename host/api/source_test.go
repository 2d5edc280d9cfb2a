package api_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/api"
)

const (
	hexA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	hexB = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
)

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want api.Source
		err  string // substring of the error; "" for success
	}{
		{in: "ghcr.io/acme/hello:1.2.0", want: api.Source{Image: "ghcr.io/acme/hello:1.2.0"}},
		{in: "  localhost:5000/hello  ", want: api.Source{Image: "localhost:5000/hello"}},
		{in: "hello", want: api.Source{Image: "hello"}},
		{in: "oci://ghcr.io/acme/hello:1", want: api.Source{Image: "ghcr.io/acme/hello:1"}},
		{in: "ghcr.io/acme/hello@sha256:" + hexA, want: api.Source{Image: "ghcr.io/acme/hello@sha256:" + hexA}},
		{in: "ghcr.io/acme/hello:1#sha256=" + hexA, want: api.Source{Image: "ghcr.io/acme/hello:1", SHA256: "sha256:" + hexA}},
		{in: "https://example.com/m.wasm#sha256=" + hexA, want: api.Source{URL: "https://example.com/m.wasm", SHA256: "sha256:" + hexA}},
		{in: "https://example.com/m.wasm#sha256:" + strings.ToUpper(hexA), want: api.Source{URL: "https://example.com/m.wasm", SHA256: "sha256:" + hexA}},
		{in: "http://10.0.0.1:8080/m.wasm?x=1#sha256=" + hexA, want: api.Source{URL: "http://10.0.0.1:8080/m.wasm?x=1", SHA256: "sha256:" + hexA}},

		{in: "", err: "empty"},
		{in: "https://example.com/m.wasm", err: "without a sha256"},
		{in: "https://example.com/m.wasm#md5=abc", err: "sha256=<hex>"},
		{in: "https://example.com/m.wasm#sha256=abc", err: "64 hex digits"},
		{in: "https://example.com/m.wasm#sha256=" + strings.Repeat("g", 64), err: "not hex"},
		{in: "https://user:pw@example.com/m.wasm#sha256=" + hexA, err: "credentials"},
		{in: "https:///m.wasm#sha256=" + hexA, err: "no host"},
		{in: "ftp://example.com/m.wasm", err: `scheme "ftp"`},
		{in: "file:///m.wasm", err: `scheme "file"`},
		{in: "Upper/Case:1", err: "reference"},
		{in: "ghcr.io/acme/hello@sha256:abc", err: "reference"},
		{in: "ghcr.io/a b", err: "letters, digits"},
		{in: "ghcr.io/\xffa", err: "letters, digits"},
		{in: "\"ghcr.io/a", err: "letters, digits"},
		{in: strings.Repeat("a", api.MaxSourceLen+1), err: "limit"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := api.ParseSource(tc.in)
			checkParsed(t, got, err, tc.want, tc.err, func(s api.Source) (api.Source, error) {
				return api.ParseSource(s.String())
			})
		})
	}
}

func TestNewSource(t *testing.T) {
	src, err := api.NewSource("https://example.com/m.wasm", hexA)
	require.NoError(t, err)
	assert.Equal(t, api.Source{URL: "https://example.com/m.wasm", SHA256: "sha256:" + hexA}, src)

	src, err = api.NewSource("https://example.com/m.wasm#sha256="+hexA, "sha256:"+hexA)
	require.NoError(t, err)
	assert.Equal(t, "sha256:"+hexA, src.SHA256)

	src, err = api.NewSource("ghcr.io/acme/hello:1", "")
	require.NoError(t, err)
	assert.Equal(t, api.Source{Image: "ghcr.io/acme/hello:1"}, src)

	_, err = api.NewSource("https://example.com/m.wasm#sha256="+hexA, hexB)
	require.ErrorIs(t, err, api.ErrInvalidSource)
	assert.Contains(t, err.Error(), "two digests")

	_, err = api.NewSource("https://example.com/m.wasm", "")
	require.ErrorIs(t, err, api.ErrInvalidSource)
}

func TestSourceValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  api.Source
		err  string
	}{
		{"image", api.Source{Image: "ghcr.io/a/b:1"}, ""},
		{"image pinned", api.Source{Image: "ghcr.io/a/b:1", SHA256: hexA}, ""},
		{"url", api.Source{URL: "https://h/m.wasm", SHA256: "sha256:" + hexA}, ""},
		{"empty", api.Source{}, "neither"},
		{"both", api.Source{Image: "a", URL: "https://h/m", SHA256: hexA}, "both"},
		{"url fragment", api.Source{URL: "https://h/m#x", SHA256: hexA}, "fragment"},
		{"url space", api.Source{URL: "https://h/m x", SHA256: hexA}, "printable ASCII"},
		{"bad digest", api.Source{Image: "a", SHA256: "sha512:" + hexA}, "64 hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.src.Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, api.ErrInvalidSource)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestParseRefFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want api.Source
		err  string
	}{
		{name: "image", in: "image: ghcr.io/acme/hello:1.2.0\n", want: api.Source{Image: "ghcr.io/acme/hello:1.2.0"}},
		{name: "image with port", in: "image: localhost:5000/hello:1", want: api.Source{Image: "localhost:5000/hello:1"}},
		{name: "comments and blanks", in: "# hello, from the registry\n\nimage: ghcr.io/acme/hello:1 # pinned below\nsha256: " + hexA + "\n",
			want: api.Source{Image: "ghcr.io/acme/hello:1", SHA256: "sha256:" + hexA}},
		{name: "url", in: "url: https://example.com/m.wasm\nsha256: sha256:" + hexA + "\n",
			want: api.Source{URL: "https://example.com/m.wasm", SHA256: "sha256:" + hexA}},
		{name: "quoted", in: "url: \"https://example.com/m.wasm\"\nsha256: '" + hexA + "'\n",
			want: api.Source{URL: "https://example.com/m.wasm", SHA256: "sha256:" + hexA}},
		{name: "CRLF and BOM", in: "\xef\xbb\xbfimage: ghcr.io/acme/hello:1\r\n", want: api.Source{Image: "ghcr.io/acme/hello:1"}},
		{name: "one line image", in: "ghcr.io/acme/hello:1\n", want: api.Source{Image: "ghcr.io/acme/hello:1"}},
		{name: "one line url", in: "# from the web\nhttps://example.com/m.wasm#sha256=" + hexA + "\n",
			want: api.Source{URL: "https://example.com/m.wasm", SHA256: "sha256:" + hexA}},
		{name: "url fragment as key value", in: "url: https://example.com/m.wasm#sha256=" + hexA, err: "fragment"},

		{name: "empty", in: "", err: "names nothing"},
		{name: "only comments", in: "# nothing\n\n", err: "names nothing"},
		{name: "url without digest", in: "url: https://example.com/m.wasm\n", err: "without a sha256"},
		{name: "unknown key", in: "imgae: ghcr.io/a:1\n", err: `line 1: unknown key "imgae"`},
		{name: "duplicate", in: "image: a\nimage: b\n", err: "line 2: image given again (first on line 1)"},
		{name: "both", in: "image: a\nurl: https://h/m\nsha256: " + hexA, err: "both image and url"},
		{name: "no value", in: "image:\n", err: "line 1: image has no value"},
		{name: "two bare lines", in: "ghcr.io/a:1\nghcr.io/b:1\n", err: "line 2"},
		{name: "key after bare", in: "ghcr.io/a:1\nsha256: " + hexA, err: "line 2"},
		{name: "bare after key", in: "image: ghcr.io/a:1\nghcr.io/b:1", err: "line 2"},
		{name: "unterminated quote", in: "image: \"ghcr.io/a:1\n", err: "unterminated"},
		{name: "bad sha", in: "image: a\nsha256: xyz\n", err: "line 2"},
		{name: "binary", in: "image: a\x00", err: "UTF-8"},
		{name: "huge", in: strings.Repeat("#", api.MaxRefFileSize+1), err: "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := api.ParseRefFile([]byte(tc.in))
			checkParsed(t, got, err, tc.want, tc.err, func(s api.Source) (api.Source, error) {
				return api.ParseRefFile(s.RefFile())
			})
		})
	}
}

// checkParsed checks what a parser made of a case: an ErrInvalidSource
// that mentions wantErr, or else want, which the parser reads back the
// same from its own text (again).
func checkParsed(t *testing.T, got api.Source, err error, want api.Source, wantErr string, again func(api.Source) (api.Source, error)) {
	t.Helper()
	if wantErr != "" {
		require.ErrorIs(t, err, api.ErrInvalidSource)
		assert.Contains(t, err.Error(), wantErr)
		return
	}
	require.NoError(t, err)
	assert.Equal(t, want, got)
	back, err := again(got)
	require.NoError(t, err)
	assert.Equal(t, got, back)
}

func TestReadRefFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "hello"+api.RefFileExt)
	require.NoError(t, os.WriteFile(p, []byte("image: ghcr.io/acme/hello:1\n"), 0o644))
	src, err := api.ReadRefFile(p)
	require.NoError(t, err)
	assert.Equal(t, "ghcr.io/acme/hello:1", src.Image)

	require.NoError(t, os.WriteFile(p, []byte("image: \n"), 0o644))
	_, err = api.ReadRefFile(p)
	require.ErrorIs(t, err, api.ErrInvalidSource)
	assert.Contains(t, err.Error(), p)

	_, err = api.ReadRefFile(filepath.Join(dir, "missing.ref"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
