// Package doclinks checks that the repository's markdown files name only
// files and folders the repository has: a relative link, or a path in
// backticks that starts at the repository's root or at the file's folder;
// and that a section of RATIONALE.md they name by its heading exists.
package doclinks

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// link is a markdown link's target: [text](target).
	link = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// code is a span in backticks that could be a path.
	code = regexp.MustCompile("`([A-Za-z0-9_.*/-]+)`")
	// fence opens or closes a code block, whose text is not checked.
	fence = regexp.MustCompile("^\\s*(```|~~~)")
)

// skip are the folders that hold no documentation of the repository.
var skip = map[string]bool{".git": true, "bin": true, "node_modules": true}

func TestMarkdownNamesExist(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skip[d.Name()] {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no markdown files under %s", root)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		for _, bad := range missing(t, root, f) {
			t.Errorf("%s:%d: %s names %q, which does not exist", rel, bad.line, bad.how, bad.name)
		}
	}
}

var (
	// heading is a heading of RATIONALE.md.
	heading = regexp.MustCompile(`(?m)^#{2,3} (.+)$`)
	// sectionRef is a section of RATIONALE.md named in another file:
	// RATIONALE.md ("Heading") or RATIONALE.md, "Heading".
	sectionRef = regexp.MustCompile("RATIONALE\\.md`?,? *\\(?(?:see )?\"([^\"]+)\"")
	// whyRef is a section named inside RATIONALE.md: "Why …?".
	whyRef = regexp.MustCompile(`"(Why [^"]+)"`)
)

func TestRationaleSectionsNamedExist(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "RATIONALE.md"))
	if err != nil {
		t.Fatal(err)
	}
	var headings []string
	for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
		headings = append(headings, m[1])
	}
	if len(headings) == 0 {
		t.Fatal("RATIONALE.md has no headings")
	}
	has := func(ref string) bool {
		// "Why X…" names the section whose heading starts with "Why X".
		prefix, cut := strings.CutSuffix(ref, "…")
		for _, h := range headings {
			if h == ref || cut && strings.HasPrefix(h, prefix) {
				return true
			}
		}
		return false
	}
	flat := func(b []byte) string { return strings.Join(strings.Fields(string(b)), " ") }
	// Other markdown files, then RATIONALE.md's references to itself.
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skip[d.Name()] {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".md") {
			return nil
		}
		text, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		refs := sectionRef
		if rel == "RATIONALE.md" {
			refs = whyRef
		}
		for _, m := range refs.FindAllStringSubmatch(flat(text), -1) {
			if !has(m[1]) {
				t.Errorf("%s names the section %q of RATIONALE.md, which has no such heading", rel, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type miss struct {
	line int
	how  string
	name string
}

// missing lists the names in file f that are not in the repository.
func missing(t *testing.T, root, f string) []miss {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(f)
	var out []miss
	inFence := false
	for i, line := range strings.Split(string(b), "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if !exists(filepath.Join(dir, target)) {
				out = append(out, miss{i + 1, "a link", m[1]})
			}
		}
		for _, m := range code.FindAllStringSubmatch(line, -1) {
			name := m[1]
			if !isPath(root, dir, name) {
				continue
			}
			if exists(filepath.Join(dir, name)) || exists(filepath.Join(root, name)) {
				continue
			}
			if m := declared.FindStringSubmatch(name); m != nil {
				if hasDecl(filepath.Join(dir, m[1]), m[2]) || hasDecl(filepath.Join(root, m[1]), m[2]) {
					continue
				}
				out = append(out, miss{i + 1, "a Go name in backticks", name})
				continue
			}
			out = append(out, miss{i + 1, "a path in backticks", name})
		}
	}
	return out
}

// isPath says whether a span in backticks names a path of the repository:
// it starts with ./ or ../; or its first element is an entry of the
// repository's root; or it is a file (its last element has an extension)
// or a folder (it ends in /) under the file's own folder; or it is a
// markdown file. Other spans (a module path, a MIME type, a CIDR, a
// module/component address) are not the repository's to have, nor are a
// Go package pattern (.../...) and what the build writes into bin/.
func isPath(root, dir, name string) bool {
	if strings.HasSuffix(name, "/...") || strings.HasPrefix(name, "bin/") {
		return false
	}
	if strings.HasPrefix(name, "./") || strings.HasPrefix(name, "../") {
		return true
	}
	first, _, slash := strings.Cut(name, "/")
	if !slash {
		return strings.HasSuffix(name, ".md")
	}
	if first == "" || strings.Contains(first, "*") {
		return false
	}
	if exists(filepath.Join(root, first)) {
		return true
	}
	last := name[strings.LastIndex(name, "/")+1:]
	return exists(filepath.Join(dir, first)) && (last == "" || strings.Contains(last, "."))
}

// declared matches a Go declaration of a name given as package.Name, as in
// `host/api.ToStatus`: the package's folder and the name, found in a
// declaration of one of its files.
var declared = regexp.MustCompile(`^(.+)\.([A-Z][A-Za-z0-9_]*)$`)

// hasDecl says whether a Go file of folder dir, tests left out, declares
// name: a func, a method, a type, or a const or var in a block or alone.
func hasDecl(dir, name string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	decl := regexp.MustCompile(`(?m)^(func (\([^)]*\) )?|type |var |const |\t)` + name + `\b`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		if b, err := os.ReadFile(f); err == nil && decl.Match(b) {
			return true
		}
	}
	return false
}

// exists says whether p, which may hold a glob, names something.
func exists(p string) bool {
	if strings.ContainsAny(p, "*?[") {
		m, _ := filepath.Glob(p)
		return len(m) > 0
	}
	_, err := os.Stat(p)
	return err == nil
}
