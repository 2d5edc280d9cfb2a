package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// KeyPair is a certificate and its key read from PEM files, and read
// again when either file changes: cert-manager and the kubelet renew a
// mounted Secret's files in place, and a renewed certificate must be
// presented without a restart. A renewal that does not parse (the
// certificate written, its key not yet) keeps the pair in use until the
// files agree again.
type KeyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	certMod fileStamp
	keyMod  fileStamp
	// The stamps of the last renewal that was refused, not read again.
	badCert, badKey fileStamp
	onRefused       func(error)
}

// OnRefused sets f to be told of a renewed pair that is refused (it does
// not parse, or the certificate is outside its validity); the last good
// pair is served meanwhile. f is called once for each renewal refused.
func (k *KeyPair) OnRefused(f func(error)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.onRefused = f
}

// fileStamp tells one version of a file from the next.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path) // follows the Secret volume's symlinks
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// LoadKeyPair reads the pair now, so that a bad file fails at start.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	k := &KeyPair{certFile: certFile, keyFile: keyFile}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// reload reads both files if either changed since the last read.
func (k *KeyPair) reload() error {
	cm, err := stamp(k.certFile)
	if err != nil {
		return fmt.Errorf("certificate: %w", err)
	}
	km, err := stamp(k.keyFile)
	if err != nil {
		return fmt.Errorf("certificate key: %w", err)
	}
	if k.cert != nil && (cm == k.certMod && km == k.keyMod || cm == k.badCert && km == k.badKey) {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		err = fmt.Errorf("certificate %s, key %s: %w", k.certFile, k.keyFile, err)
	} else {
		err = checkValidity(k.certFile, cert.Leaf, time.Now())
	}
	if err != nil {
		if k.cert != nil {
			k.badCert, k.badKey = cm, km
			if k.onRefused != nil {
				k.onRefused(err)
			}
		}
		return err
	}
	k.cert, k.certMod, k.keyMod = &cert, cm, km
	return nil
}

// checkValidity refuses a certificate outside its validity at now: a peer
// would refuse it, and the failure would show as a handshake error far
// from its cause.
func checkValidity(file string, leaf *x509.Certificate, now time.Time) error {
	switch {
	case leaf == nil:
		return nil
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("certificate %s is not valid before %s (now %s)", file, leaf.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case now.After(leaf.NotAfter):
		return fmt.Errorf("certificate %s expired at %s (now %s)", file, leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// Certificate is the pair as the files hold it now, or the last pair
// that parsed.
func (k *KeyPair) Certificate() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	_ = k.reload() // a failed read keeps the last good pair, which LoadKeyPair guarantees
	return k.cert
}

// GetCertificate is tls.Config.GetCertificate: a server presents the
// current pair.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate: a client
// presents the current pair, or, as crypto/tls does with a fixed one, no
// certificate to a server that accepts none of its kind.
func (k *KeyPair) GetClientCertificate(req *tls.CertificateRequestInfo) (*tls.Certificate, error) {
	cert := k.Certificate()
	if req.SupportsCertificate(cert) != nil {
		return &tls.Certificate{}, nil
	}
	return cert, nil
}
