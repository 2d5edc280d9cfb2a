// Package secret is where a host finds a module's secrets (abi.ImportSecret)
// below the host function: the values a load gives, checked and copied,
// and the host's files, read at every request, so that a rotated file (a
// Kubernetes Secret volume swaps a symlink) reaches the module at its next
// call. No value enters an error: errors name the secret, and never the
// path of the host's file.
package secret

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

// MaxValues bounds the values one load or SetSecrets gives a module.
const MaxValues = 64

// CheckValues checks the values a load or SetSecrets gives, and copies
// them: the caller's map may change after. Errors name a secret, never a
// value.
func CheckValues(in map[string][]byte) (map[string][]byte, error) {
	if len(in) > MaxValues {
		return nil, fmt.Errorf("secrets: %d values, at most %d", len(in), MaxValues)
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

// Files are the host's files of secrets: Named maps a name to its file,
// else the file of that name in Dir, when Dir is not "". Refused, when
// not "", says why the module has none of them: every secret not given is
// then not found, for that reason.
type Files struct {
	Named   map[string]string
	Dir     string
	Refused string
}

// file is the file holding the secret's value; "" when none.
func (f Files) file(name string) string {
	if f.Refused != "" {
		return ""
	}
	if p, ok := f.Named[name]; ok {
		return p
	}
	if f.Dir != "" {
		// name follows abi.ValidName: no separator, no "..".
		return filepath.Join(f.Dir, name)
	}
	return ""
}

// Check fails for each of names that neither given nor the files have.
func (f Files) Check(names []string, given map[string][]byte) error {
	var errs []error
	for _, name := range names {
		if _, ok := given[name]; ok {
			continue
		}
		p := f.file(name)
		if p == "" {
			errs = append(errs, f.none(name, " (SecretFiles, SecretsDir)"))
			continue
		}
		if _, err := os.Stat(p); err != nil {
			errs = append(errs, fileError(name, err))
		}
	}
	return errors.Join(errs...)
}

// Read reads at most abi.MaxSecretSize bytes of the secret's file, and
// says which ABI status a failure is. A file that is not a regular one (a
// FIFO, a device) fails without waiting for a writer or reading it.
func (f Files) Read(name string) ([]byte, abi.Status, error) {
	p := f.file(name)
	if p == "" {
		return nil, abi.StatusNotFound, f.none(name, "")
	}
	file, err := os.OpenFile(p, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, abi.StatusNotFound, fileError(name, err)
	}
	defer file.Close()
	if fi, err := file.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, abi.StatusUnavailable, fmt.Errorf("secret %q: the host's file of it is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(file, abi.MaxSecretSize+1))
	switch {
	case err != nil:
		return nil, abi.StatusUnavailable, fmt.Errorf("secret %q: %w", name, pathless(err))
	case len(b) > abi.MaxSecretSize:
		return nil, abi.StatusTooLarge, fmt.Errorf("secret %q exceeds %d bytes", name, abi.MaxSecretSize)
	}
	return b, abi.StatusOK, nil
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

// fileError is the error of a secret's file, without its path.
func fileError(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("secret %q: this host has no such secret", name)
	}
	return fmt.Errorf("secret %q: %w", name, pathless(err))
}

// none is the error of a secret that has no file: Refused's reason, or
// that the host has none of that name (where, appended).
func (f Files) none(name, where string) error {
	if f.Refused != "" {
		return fmt.Errorf("secret %q was not given with the load: %s", name, f.Refused)
	}
	return fmt.Errorf("secret %q: this host has no such secret%s", name, where)
}
