package secret_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/internal/secret"
)

// TestFiles: a secret is read from the file named for it, else from the
// directory; a missing one, or one too large, fails with its status and
// an error that names the secret and not the file.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	named := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.WriteFile(named, []byte("n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("t"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, abi.MaxSecretSize+1), 0o600))
	f := secret.Files{Named: map[string]string{"key": named}, Dir: dir}

	b, st, err := f.Read("key")
	require.NoError(t, err)
	assert.Equal(t, abi.StatusOK, st)
	assert.Equal(t, "n", string(b))
	b, _, err = f.Read("token")
	require.NoError(t, err)
	assert.Equal(t, "t", string(b))

	_, st, err = f.Read("absent")
	assert.Equal(t, abi.StatusNotFound, st)
	assert.EqualError(t, err, `secret "absent": this host has no such secret`)
	_, st, err = f.Read("big")
	assert.Equal(t, abi.StatusTooLarge, st)
	assert.NotContains(t, err.Error(), dir)

	_, st, err = secret.Files{}.Read("token")
	assert.Equal(t, abi.StatusNotFound, st)
	assert.EqualError(t, err, `secret "token": this host has no such secret`)

	require.NoError(t, f.Check([]string{"key", "token", "given"}, map[string][]byte{"given": nil}))
	err = f.Check([]string{"absent"}, nil)
	assert.EqualError(t, err, `secret "absent": this host has no such secret`)
	assert.EqualError(t, secret.Files{}.Check([]string{"a"}, nil), `secret "a": this host has no such secret (SecretFiles, SecretsDir)`)
}

// TestCheckValues: the values are copied; a bad name, a value too large or
// too many values fail without naming a value.
func TestCheckValues(t *testing.T) {
	in := map[string][]byte{"a": []byte("x")}
	out, err := secret.CheckValues(in)
	require.NoError(t, err)
	in["a"][0] = 'y'
	assert.Equal(t, "x", string(out["a"]))

	_, err = secret.CheckValues(map[string][]byte{"a": make([]byte, abi.MaxSecretSize+1)})
	assert.EqualError(t, err, fmt.Sprintf(`secret "a" exceeds %d bytes`, abi.MaxSecretSize))
	_, err = secret.CheckValues(map[string][]byte{"a/b": nil})
	assert.ErrorContains(t, err, `secret "a/b": `)
	many := map[string][]byte{}
	for i := range secret.MaxValues + 1 {
		many[strings.Repeat("a", i+1)] = nil
	}
	_, err = secret.CheckValues(many)
	assert.EqualError(t, err, "secrets: 65 values, at most 64")
}
