package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/internal/e2e"
)

// TestGrpcurlVersion keeps the Makefile's grpcurl and the tests' the same.
func TestGrpcurlVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(e2e.Root(t), "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^GRPCURL_VERSION\s*:=\s*(\S+)`).FindSubmatch(b)
	require.NotNil(t, m, "GRPCURL_VERSION in the Makefile")
	assert.Equal(t, e2e.GrpcurlVersion, string(m[1]))
}
