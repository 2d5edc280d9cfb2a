package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/docker/cli/cli/config"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// dockerKeychain reads registry credentials from one docker config file,
// anew for each operation, so that a rotated secret is picked up without a
// restart. It understands what docker writes: "auths" (auth, or username and
// password, or identitytoken), "credsStore" and "credHelpers".
type dockerKeychain struct {
	path string
	// explicit: the path was configured, so a missing file is an error.
	explicit bool
}

func newDockerKeychain(path string) (*dockerKeychain, error) {
	if path == "" {
		return &dockerKeychain{path: defaultDockerConfig()}, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	return &dockerKeychain{path: path, explicit: true}, nil
}

// Resolve implements authn.Keychain. The lookup order is docker's: the
// repository ("registry/repo"), then the registry; Docker Hub's key is the
// historical "https://index.docker.io/v1/".
func (k *dockerKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	if k.path == "" {
		return authn.Anonymous, nil
	}
	f, err := os.Open(k.path)
	if errors.Is(err, fs.ErrNotExist) && !k.explicit {
		return authn.Anonymous, nil
	}
	if err != nil {
		return nil, fmt.Errorf("docker config: %w", err)
	}
	defer f.Close()
	cf, err := config.LoadFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("docker config %s: %w", k.path, err)
	}
	for _, key := range []string{target.String(), target.RegistryStr()} {
		if key == name.DefaultRegistry {
			key = authn.DefaultAuthKey
		}
		ac, err := cf.GetAuthConfig(key)
		if err != nil {
			return nil, fmt.Errorf("docker config %s: credentials for %s: %w", k.path, key, err)
		}
		if ac.Username != "" || ac.Password != "" || ac.Auth != "" || ac.IdentityToken != "" || ac.RegistryToken != "" {
			return authn.FromConfig(authn.AuthConfig{
				Username:      ac.Username,
				Password:      ac.Password,
				Auth:          ac.Auth,
				IdentityToken: ac.IdentityToken,
				RegistryToken: ac.RegistryToken,
			}), nil
		}
	}
	return authn.Anonymous, nil
}

// describe says where credentials come from, for error messages.
func (k *dockerKeychain) describe() string {
	if k.path == "" {
		return "no docker config file"
	}
	return "docker config " + k.path
}
