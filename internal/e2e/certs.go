package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/host/api"
)

// Certs are PEM files of a throwaway PKI: a CA; a server certificate for
// 127.0.0.1 and localhost, good for clients too, with the peer role (a
// host presents its server certificate to its peers); a client
// certificate for each role (api.Role.Organization in its Subject
// Organization) and one with no role; and a client certificate signed by
// another CA that the server does not trust. Issue makes more of the CA.
type Certs struct {
	CA                    string
	ServerCert, ServerKey string
	AdminCert, AdminKey   string
	InvokeCert, InvokeKey string
	PeerCert, PeerKey     string
	NoRoleCert, NoRoleKey string // verified, but naming no role
	// ClientCert and ClientKey are AdminCert and AdminKey: the client
	// certificate of tests that need one and do not care which role.
	ClientCert, ClientKey  string
	StrangerCert, Stranger string // a client certificate and key of another CA

	dir   string
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// NewCerts writes a fresh PKI into a temporary directory.
func NewCerts(t testing.TB) Certs {
	t.Helper()
	dir := t.TempDir()
	ca, caKey := newCA(t, "tinyhost test CA")
	other, otherKey := newCA(t, "someone else's CA")
	c := Certs{CA: filepath.Join(dir, "ca.pem"), dir: dir, ca: ca, caKey: caKey}
	writePEM(t, c.CA, "CERTIFICATE", ca.Raw)
	c.ServerCert, c.ServerKey = issue(t, dir, "server", ca, caKey, true, []string{api.RolePeer.Organization()})
	c.AdminCert, c.AdminKey = c.Issue(t, "admin", api.RoleAdmin)
	c.InvokeCert, c.InvokeKey = c.Issue(t, "invoke", api.RoleInvoke)
	c.PeerCert, c.PeerKey = c.Issue(t, "peer", api.RolePeer)
	c.NoRoleCert, c.NoRoleKey = issue(t, dir, "norole", ca, caKey, false, []string{"system:masters", "tinyhost:root"})
	c.ClientCert, c.ClientKey = c.AdminCert, c.AdminKey
	c.StrangerCert, c.Stranger = issue(t, dir, "stranger", other, otherKey, false, []string{api.RoleAdmin.Organization()})
	return c
}

// Issue writes a client certificate of the CA named name (its Common Name
// and file names) with roles in its Subject Organization.
func (c Certs) Issue(t testing.TB, name string, roles ...api.Role) (certFile, keyFile string) {
	t.Helper()
	orgs := make([]string, len(roles))
	for i, r := range roles {
		orgs[i] = r.Organization()
	}
	return issue(t, c.dir, name, c.ca, c.caKey, false, orgs)
}

var serial atomic.Int64

func template(cn string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

func newCA(t testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(cn)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func issue(t testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, server bool, orgs []string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(name)
	tmpl.Subject.Organization = orgs
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
