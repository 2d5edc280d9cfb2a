package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyhost/tinyhost/host/client"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

func commonName(t *testing.T, c *tls.Certificate) string {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	require.NoError(t, err)
	return leaf.Subject.CommonName
}

func TestKeyPairRenewal(t *testing.T) {
	ca := e2e.NewCA(t, "tinyhost CA")
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first, firstKey := ca.Issue(t, e2e.Leaf{Name: "first", Client: true})
	second, secondKey := ca.Issue(t, e2e.Leaf{Name: "second", Client: true})
	start := time.Now().Add(-time.Hour)
	e2e.Install(t, first, firstKey, certPath, keyPath, start)

	pair, err := client.LoadKeyPair(certPath, keyPath)
	require.NoError(t, err)
	assert.Equal(t, "first", commonName(t, pair.Certificate()))

	e2e.Install(t, second, secondKey, certPath, keyPath, start.Add(time.Minute))
	assert.Equal(t, "second", commonName(t, pair.Certificate()), "a renewed pair is read again")

	// Half a renewal: the first certificate beside the second's key does
	// not parse, so the second pair stays in use.
	e2e.Install(t, first, secondKey, certPath, keyPath, start.Add(2*time.Minute))
	assert.Equal(t, "second", commonName(t, pair.Certificate()))
	require.NoError(t, os.Remove(keyPath))
	assert.Equal(t, "second", commonName(t, pair.Certificate()), "a missing file keeps the pair in use")

	_, err = client.LoadKeyPair(certPath, keyPath)
	assert.ErrorContains(t, err, "tls.key", "a pair that cannot be read fails at start")
}
