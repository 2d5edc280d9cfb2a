package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/tinyhost/tinyhost/abi"
)

// Secrets (abi.ImportSecret). A secret's value comes from the load
// (LoadOptions.Secrets, the operator's, from Kubernetes Secrets), kept in
// memory with the version and replaced whole by SetSecrets, or else from
// the host's file of that name, read at every request, so that a rotated
// file (a Kubernetes Secret volume swaps a symlink) reaches the module at
// its next call. No value enters a log line, an error, a status or a
// listing: those name the secret.

// maxSecrets bounds the values one load or SetSecrets gives a module.
const maxSecrets = 64

// checkSecretValues checks the values a load or SetSecrets gives, and
// copies them: the caller's map may change after. Errors name a secret,
// never a value.
func checkSecretValues(in map[string][]byte) (map[string][]byte, error) {
	if len(in) > maxSecrets {
		return nil, fmt.Errorf("secrets: %d values, at most %d", len(in), maxSecrets)
	}
	out := make(map[string][]byte, len(in))
	for name, b := range in {
		if err := abi.ValidName(name); err != nil {
			return nil, fmt.Errorf("secret %q: %w", name, err)
		}
		if len(b) > abi.MaxSecretSize {
			return nil, fmt.Errorf("secret %q exceeds %d bytes", name, abi.MaxSecretSize)
		}
		out[name] = slices.Clone(b)
	}
	return out, nil
}

// SetSecrets replaces, whole, the secret values the load of the module
// gave it (LoadOptions.Secrets): its instances read the new values at
// their next request, without a reload. A name absent from secrets falls
// back to the host's file of that name. The values are checked as a
// load's; the error wraps ErrNotFound when the module is not loaded.
func (h *Host) SetSecrets(ctx context.Context, module string, secrets map[string][]byte) error {
	vals, err := checkSecretValues(secrets)
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

// secretFile is the file holding the secret's value: the one SecretFiles
// names, else the file of that name in SecretsDir; "" when neither.
func (o *Options) secretFile(name string) string {
	if f, ok := o.SecretFiles[name]; ok {
		return f
	}
	if o.SecretsDir != "" {
		// name follows abi.ValidName: no separator, no "..".
		return filepath.Join(o.SecretsDir, name)
	}
	return ""
}

// checkSecrets fails a load granted a secret that neither the load's
// values (given) nor the host's files have.
func (h *Host) checkSecrets(g *grants, given map[string][]byte) error {
	var errs []error
	for _, name := range g.secrets {
		if _, ok := given[name]; ok {
			continue
		}
		f := h.opts.secretFile(name)
		if f == "" {
			errs = append(errs, fmt.Errorf("secret %q: this host has no such secret (SecretFiles, SecretsDir)", name))
			continue
		}
		if _, err := os.Stat(f); err != nil {
			errs = append(errs, secretError(name, err))
		}
	}
	return errors.Join(errs...)
}

// pathless is err without the path of a *fs.PathError, which names the
// host's files to whoever loads a module.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// secretError is the error of a secret's file, without its path.
func secretError(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("secret %q: this host has no such secret", name)
	}
	return fmt.Errorf("secret %q: %w", name, pathless(err))
}

// readSecret reads at most abi.MaxSecretSize bytes of the secret's file.
func (h *Host) readSecret(name string) ([]byte, abi.Status, error) {
	f := h.opts.secretFile(name)
	if f == "" {
		return nil, abi.StatusNotFound, fmt.Errorf("secret %q: this host has no such secret", name)
	}
	file, err := os.Open(f)
	if err != nil {
		return nil, abi.StatusNotFound, secretError(name, err)
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, abi.MaxSecretSize+1))
	switch {
	case err != nil:
		return nil, abi.StatusUnavailable, fmt.Errorf("secret %q: %w", name, pathless(err))
	case len(b) > abi.MaxSecretSize:
		return nil, abi.StatusTooLarge, fmt.Errorf("secret %q exceeds %d bytes", name, abi.MaxSecretSize)
	}
	return b, abi.StatusOK, nil
}

// hostSecret is abi.ImportSecret.
func (in *instance) hostSecret(req []byte) (abi.Status, []byte) {
	v := in.v
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
	b, st, err := v.h.readSecret(name)
	if err != nil {
		in.logFailure("secret unavailable", err.Error())
		return st, []byte(err.Error())
	}
	return abi.StatusOK, b
}
