package image

import (
	"fmt"
	"slices"
	"strings"
)

// Ref is where an image built by `make images` is found: Name is the name
// the manifests use (e.g. "tinyhost-operator"), Repository where it lives
// (the name itself, or registry/name once pushed), Tag its version, and
// Digest its index's digest when it was pushed.
type Ref struct {
	Name, Repository, Tag, Digest string
}

// String is the reference a pod spec takes: by digest when pushed, else by
// tag.
func (r Ref) String() string {
	if r.Digest != "" {
		return r.Repository + "@" + r.Digest
	}
	return r.Repository + ":" + r.Tag
}

// Kustomization is a kustomization.yaml that takes base (a directory,
// relative to the file) and points each of refs' names at the image
// built: `kubectl apply -k` of its directory installs what base installs
// with the images of this build.
func Kustomization(base string, refs []Ref) []byte {
	var b strings.Builder
	b.WriteString("# Written by `make images`: " + base + " with the images it built.\n")
	fmt.Fprintf(&b, "resources:\n- %s\nimages:\n", base)
	refs = slices.Clone(refs)
	slices.SortFunc(refs, func(a, b Ref) int { return strings.Compare(a.Name, b.Name) })
	for _, r := range refs {
		fmt.Fprintf(&b, "- name: %s\n  newName: %s\n", r.Name, r.Repository)
		if r.Digest != "" {
			fmt.Fprintf(&b, "  digest: %s\n", r.Digest)
		} else {
			fmt.Fprintf(&b, "  newTag: %q\n", r.Tag)
		}
	}
	return []byte(b.String())
}
