package daemon_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/cmd/tinyhost/internal/daemon"
)

func TestParseConfigSecrets(t *testing.T) {
	c, err := daemon.ParseConfig([]string{"--secret", "api-token=/run/token", "--secret", "db=/run/db", "--secrets-dir", "/run/secrets"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"api-token=/run/token", "db=/run/db"}, c.Secrets)
	assert.Equal(t, "/run/secrets", c.SecretsDir)

	for args, want := range map[string]string{
		"token":            `secret "token": want name=file`,
		"Token=/f":         `secret "Token=/f": `,
		"a=/f,a=/g":        `secret "a" is given twice`,
		"../x=/etc/shadow": `secret "../x=/etc/shadow": `,
		"token=":           `secret "token=": want name=file`,
	} {
		_, err := daemon.ParseConfig([]string{"--secret", args}, nil)
		assert.ErrorContains(t, err, want, args)
	}
}
