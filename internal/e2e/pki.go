package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throwaway certificate authority that issues the certificates a
// test asks for, each as PEM files: what a kubernetes.io/tls Secret holds
// as ca.crt, tls.crt and tls.key.
type CA struct {
	// File is the CA's certificate, PEM.
	File string

	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Leaf is a certificate CA.Issue signs.
type Leaf struct {
	// Name is the subject's common name, and the files' names.
	Name string
	// Organizations are the subject's; a host takes a client's role from
	// them ("tinyhost:admin", "tinyhost:invoke", "tinyhost:peer").
	Organizations []string
	// DNSNames and IPs are the names a server certificate is valid for.
	DNSNames []string
	IPs      []string
	// Server and Client are the extended key usages serverAuth and
	// clientAuth; a host has both, since it presents its certificate to
	// its peers.
	Server, Client bool
	// NotBefore and NotAfter, when set, replace the validity of an hour
	// ago to a day from now.
	NotBefore, NotAfter time.Time
}

// NewCA makes a CA in a temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	cert, key := newCA(t, name)
	ca := &CA{File: filepath.Join(t.TempDir(), "ca.crt"), cert: cert, key: key}
	ca.dir = filepath.Dir(ca.File)
	writePEM(t, ca.File, "CERTIFICATE", cert.Raw)
	return ca
}

// Issue signs l and returns the PEM files of the certificate and its key.
func (ca *CA) Issue(t testing.TB, l Leaf) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(l.Name)
	tmpl.Subject = pkix.Name{CommonName: l.Name, Organization: l.Organizations}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.DNSNames = l.DNSNames
	if !l.NotBefore.IsZero() {
		tmpl.NotBefore = l.NotBefore
	}
	if !l.NotAfter.IsZero() {
		tmpl.NotAfter = l.NotAfter
	}
	for _, s := range l.IPs {
		ip := net.ParseIP(s)
		if ip == nil {
			t.Fatalf("certificate %s: %q is not an IP address", l.Name, s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, l.Name+".crt"), filepath.Join(ca.dir, l.Name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

// Install copies a certificate and its key to the paths a process reads,
// as a renewal of a mounted Secret does, dated at: a renewal must show
// even on a file system whose times are coarse.
func Install(t testing.TB, certFile, keyFile, certPath, keyPath string, at time.Time) {
	t.Helper()
	for _, f := range [][2]string{{certFile, certPath}, {keyFile, keyPath}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f[1], at, at); err != nil {
			t.Fatal(err)
		}
	}
}
