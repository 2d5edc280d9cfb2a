package daemon

import (
	"fmt"
	"strings"

	"github.com/tinyhost/tinyhost/abi"
)

// secretFiles parses --secret name=file pairs into host.Options.SecretFiles.
// It names the pair at fault, never a file's content.
func secretFiles(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	files := make(map[string]string, len(pairs))
	for _, p := range pairs {
		name, file, ok := strings.Cut(p, "=")
		if !ok || file == "" {
			return nil, fmt.Errorf("secret %q: want name=file", p)
		}
		if err := abi.ValidName(name); err != nil {
			return nil, fmt.Errorf("secret %q: %v", p, err)
		}
		if _, dup := files[name]; dup {
			return nil, fmt.Errorf("secret %q is given twice", name)
		}
		files[name] = file
	}
	return files, nil
}

// must returns v of a result whose error has been checked already.
func must[T any](v T, _ error) T { return v }
