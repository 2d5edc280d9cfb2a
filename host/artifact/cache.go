package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tinyhost/tinyhost/host/api"
)

// cache is the content-addressed store under Options.CacheDir:
//
//	blobs/sha256/<hex>       wasm bytes, named by their digest
//	refs/<sha256(ref)>.json  what a reference resolved to, and when
//
// Every file is written to a temporary name in its directory and renamed into
// place, so a reader (another Client, another process) sees a whole file or
// none. A blob is verified each time it is read; one that does not match its
// name is removed. Methods on a nil *cache do nothing and find nothing.
type cache struct {
	dir string
	log hclog.Logger
}

func openCache(dir string, log hclog.Logger) (*cache, error) {
	for _, d := range []string{filepath.Join(dir, "blobs", "sha256"), filepath.Join(dir, "refs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("artifact: cache: %w", err)
		}
	}
	return &cache{dir: dir, log: log}, nil
}

// refEntry is what a reference resolved to.
type refEntry struct {
	// Reference is "registry/repo@sha256:<manifest digest>".
	Reference   string            `json:"reference"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Resolved    time.Time         `json:"resolved"`
}

func (e refEntry) meta(fromCache, stale bool) Meta {
	return Meta{
		Digest:      e.Digest,
		Size:        e.Size,
		Reference:   e.Reference,
		Annotations: e.Annotations,
		FromCache:   fromCache,
		Stale:       stale,
		Resolved:    e.Resolved,
	}
}

// blobPath is where the blob of a digest lives; "" for a malformed digest,
// so that no digest can name a path outside the cache.
func (c *cache) blobPath(digest string) string {
	d := api.Source{SHA256: digest}.Digest()
	if d == "" || d != digest {
		return ""
	}
	return filepath.Join(c.dir, "blobs", "sha256", strings.TrimPrefix(d, "sha256:"))
}

func (c *cache) refPath(ref string) string {
	h := sha256.Sum256([]byte(ref))
	return filepath.Join(c.dir, "refs", hex.EncodeToString(h[:])+".json")
}

// blob returns the cached bytes of digest after checking them.
func (c *cache) blob(digest string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	p := c.blobPath(digest)
	if p == "" {
		return nil, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("cache: cannot read blob", "digest", digest, "error", err)
		}
		return nil, false
	}
	if got := digestOf(b); got != digest {
		c.log.Warn("cache: corrupt blob removed, fetching it again", "path", p, "want", digest, "got", got)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("cache: cannot remove corrupt blob", "path", p, "error", err)
		}
		return nil, false
	}
	return b, true
}

// putBlob stores verified bytes under their digest. A failure is logged: the
// fetch itself succeeded.
func (c *cache) putBlob(digest string, b []byte) {
	if c == nil {
		return
	}
	p := c.blobPath(digest)
	if p == "" {
		return
	}
	if err := writeAtomic(p, b); err != nil {
		c.log.Warn("cache: cannot store blob", "digest", digest, "error", err)
	}
}

// ref returns what ref last resolved to.
func (c *cache) ref(ref string) (refEntry, bool) {
	if c == nil {
		return refEntry{}, false
	}
	b, err := os.ReadFile(c.refPath(ref))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("cache: cannot read reference", "reference", ref, "error", err)
		}
		return refEntry{}, false
	}
	var e refEntry
	if err := json.Unmarshal(b, &e); err != nil || c.blobPath(e.Digest) == "" {
		c.log.Warn("cache: ignoring a malformed reference entry", "reference", ref, "error", err)
		return refEntry{}, false
	}
	return e, true
}

// putRef records what ref resolved to.
func (c *cache) putRef(ref string, e refEntry) {
	if c == nil {
		return
	}
	b, err := json.Marshal(e)
	if err == nil {
		err = writeAtomic(c.refPath(ref), b)
	}
	if err != nil {
		c.log.Warn("cache: cannot store reference", "reference", ref, "error", err)
	}
}

// writeAtomic writes b to a temporary file beside path, syncs it and renames
// it over path.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
