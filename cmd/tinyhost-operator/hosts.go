package main

import (
	"fmt"

	"github.com/tinyhost/tinyhost/host/client"
)

// hostOptions are how the operator reaches hosts: TLS (and a client
// certificate, which must name the admin role) when a --host-tls* flag is
// given, the hosts' admin bearer token with --host-token-file. A token implies TLS, verified against --host-tls-ca
// or the system roots, and is never sent over plaintext, so that an
// address that is not a host with a certificate it can prove (a TinyHost
// created by hand with a listener's address) gets no credential; unless
// --host-token-plaintext. The files are read here, once, so that a bad one
// stops the operator at start.
func hostOptions(c config) (client.Options, error) {
	o := client.Options{
		TLS: c.HostTLS, CAFile: c.HostTLSCA, CertFile: c.HostTLSCert, KeyFile: c.HostTLSKey,
		TokenFile: c.HostTokenFile,
	}
	if c.HostTokenFile != "" && !c.HostTokenPlaintext {
		o.TLS, o.TokenNeedsTLS = true, true
	}
	o, err := o.Resolve()
	if err != nil {
		return o, fmt.Errorf("--host-tls-*, --host-token-file: %w", err)
	}
	return o, nil
}
