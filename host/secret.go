package host

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/tinyhost/tinyhost/abi"
)

// Secrets (abi.ImportSecret). The host holds no secret value: it reads the
// file of a secret at every request, so that a rotated file (a Kubernetes
// Secret volume swaps a symlink) reaches the module at its next call, and
// the value lives only in the result the guest receives. No value enters a
// log line, an error, a status or a listing: those name the secret.

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

// checkSecrets fails a load granted a secret the host has no file for.
func (h *Host) checkSecrets(g *grants) error {
	var errs []error
	for _, name := range g.secrets {
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
	b, st, err := v.h.readSecret(name)
	if err != nil {
		in.logFailure("secret unavailable", err.Error())
		return st, []byte(err.Error())
	}
	return abi.StatusOK, b
}
