package host

import (
	"context"
	"fmt"
	"slices"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/internal/secret"
)

// Secrets (abi.ImportSecret). A secret's value comes from the load
// (LoadOptions.Secrets, the operator's, from Kubernetes Secrets), kept in
// memory with the version and replaced whole by SetSecrets, or else from
// the host's file of that name, read at every request, so that a rotated
// file (a Kubernetes Secret volume swaps a symlink) reaches the module at
// its next call (internal/secret). No value enters a log line, an error, a
// status or a listing: those name the secret.

// SetSecrets replaces, whole, the secret values the load of the module
// gave it (LoadOptions.Secrets): its instances read the new values at
// their next request, without a reload. A name absent from secrets falls
// back to the host's file of that name, for a module of no namespace
// (api.LabelNamespace). The values are checked as a load's; the error
// wraps ErrNotFound when the module is not loaded.
func (h *Host) SetSecrets(ctx context.Context, module string, secrets map[string][]byte) error {
	vals, err := secret.CheckValues(secrets)
	if err != nil {
		return fmt.Errorf("host: set secrets of %q: %w", module, err)
	}
	m := (*h.modules.Load())[module]
	if m == nil {
		return fmt.Errorf("host: set secrets: %w", notLoaded(module))
	}
	v := m.current.Load()
	if v == nil {
		return fmt.Errorf("host: set secrets: %w", notLoaded(module))
	}
	v.secrets.Store(&vals)
	return nil
}

// addSecret adds the grant n, "secret:" followed by name.
func (g *grants) addSecret(n, name string, targeted bool) error {
	if !targeted {
		return fmt.Errorf("capability %q names no secret: want secret:<name>", n)
	}
	if err := abi.ValidName(name); err != nil {
		return fmt.Errorf("capability %q: secret name: %w", n, err)
	}
	g.set |= capSecret
	g.secrets = append(g.secrets, name)
	return nil
}

// secretFiles are the host's files of secrets a module of namespace ns
// may read: none for a module of a namespace, a tenant's, which reads
// only the values its load gave (its TinyModule's spec.secrets, from its
// namespace's Secrets), not the host's own.
func (o *Options) secretFiles(ns string) secret.Files {
	if ns != "" {
		return secret.Files{Refused: "a module of namespace " + ns + " reads only the secrets its load gave (its TinyModule's spec.secrets), not the host's files"}
	}
	return secret.Files{Named: o.SecretFiles, Dir: o.SecretsDir}
}

// Secret is abi.ImportSecret (guest.Services).
func (in *instance) Secret(req []byte) (abi.Status, []byte) {
	v := in.v
	if len(req) > abi.MaxNameLen {
		// Refused before the name is copied: the request may be all of
		// the guest's memory, which the host would copy to refuse it.
		return failed(abi.StatusBadRequest, "secret: a name of %d bytes is longer than %d bytes", len(req), abi.MaxNameLen)
	}
	name := string(req)
	if err := abi.ValidName(name); err != nil {
		return failed(abi.StatusBadRequest, "secret: %v", err)
	}
	if !slices.Contains(v.caps.secrets, name) {
		reason := fmt.Sprintf("module %q may not read secret %q: capability %s:%s is not granted", v.name, name, abi.CapSecret, name)
		in.logFailure("secret denied", reason)
		return abi.StatusDenied, []byte(reason)
	}
	if b, ok := (*v.secrets.Load())[name]; ok {
		return abi.StatusOK, b
	}
	b, st, err := v.h.opts.secretFiles(v.namespace()).Read(name)
	if err != nil {
		in.logFailure("secret unavailable", err.Error())
		return st, []byte(err.Error())
	}
	return abi.StatusOK, b
}
