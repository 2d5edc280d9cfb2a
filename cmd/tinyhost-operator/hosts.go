package main

import (
	"fmt"

	"github.com/tinyhost/tinyhost/host/client"
)

// hostOptions are how the operator reaches hosts: TLS (and a client
// certificate) when a --host-tls* flag is given, a bearer token with
// --host-token-file. The files are read here, once, so that a bad one
// stops the operator at start.
func hostOptions(c config) (client.Options, error) {
	o, err := client.Options{
		TLS: c.HostTLS, CAFile: c.HostTLSCA, CertFile: c.HostTLSCert, KeyFile: c.HostTLSKey,
		TokenFile: c.HostTokenFile,
	}.Resolve()
	if err != nil {
		return o, fmt.Errorf("--host-tls-*, --host-token-file: %w", err)
	}
	return o, nil
}
