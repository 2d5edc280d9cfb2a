// Command mkimage builds OCI images of tinyhost's binaries without a
// container engine (package image does the work): `make images` runs
//
//	go run ./internal/image/mkimage --out bin/images --version V \
//	  tinyhost=./cmd/tinyhost tinyhost-operator=./cmd/tinyhost-operator
//
// For each NAME=PACKAGE it writes the OCI layout OUT/NAME (the image index
// tagged V) and OUT/NAME.ref (the reference to run), pushes to
// --registry when given, and prints digests and sizes; with --kustomize
// it writes OUT/kustomization.yaml, that base with these images.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tinyhost/tinyhost/internal/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	out := fs.String("out", "bin/images", "directory of the OCI layouts")
	version := fs.String("version", "", "version the binaries report and the images' tag (required)")
	source := fs.String("source", "", "repository URL, for the org.opencontainers.image.source label")
	revision := fs.String("revision", "", "commit, for the org.opencontainers.image.revision label")
	created := fs.Int64("created", 0, "Unix time stamped on the images and their files (e.g. the commit's)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH[/VARIANT]")
	registry := fs.String("registry", "", "push each image to REGISTRY/NAME:VERSION (e.g. ghcr.io/acme)")
	caCerts := fs.String("ca-certs", image.DefaultCACerts, "PEM bundle of CA certificates copied into the images")
	ports := fs.String("ports", "tinyhost=50051/tcp", "NAME=PORT/PROTO,... ports an image exposes")
	kustomize := fs.String("kustomize", "", "write OUT/kustomization.yaml: this base (relative to OUT) with the images built")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || fs.NArg() == 0 {
		return errors.New("usage: mkimage --version V [flags] NAME=PACKAGE...") //nolint:staticcheck // a usage line ends in "..."
	}
	plats, err := parsePlatforms(*platforms)
	if err != nil {
		return err
	}
	exposed := map[string][]string{}
	for _, kv := range strings.Split(*ports, ",") {
		if n, p, ok := strings.Cut(kv, "="); ok {
			exposed[n] = append(exposed[n], p)
		}
	}
	var refs []image.Ref
	for _, arg := range fs.Args() {
		n, pkg, ok := strings.Cut(arg, "=")
		if !ok || n == "" || pkg == "" {
			return fmt.Errorf("%q: want NAME=PACKAGE", arg)
		}
		o := image.Options{
			Name: n, Package: pkg, Platforms: plats, Version: *version,
			Source: *source, Revision: *revision, Created: time.Unix(*created, 0),
			CACerts: *caCerts, Ports: exposed[n],
		}
		ref, err := build(ctx, o, *out, *registry)
		if err != nil {
			return err
		}
		refs = append(refs, ref)
	}
	if *kustomize != "" {
		path := filepath.Join(*out, "kustomization.yaml")
		if err := os.WriteFile(path, image.Kustomization(*kustomize, refs), 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: kubectl apply -k %s installs %s with these images\n", path, *out, *kustomize)
	}
	return nil
}

// build builds, writes, pushes and prints one image.
func build(ctx context.Context, o image.Options, out, registry string) (image.Ref, error) {
	idx, err := image.Build(ctx, o)
	if err != nil {
		return image.Ref{}, err
	}
	dir := filepath.Join(out, o.Name)
	if err := image.WriteLayout(dir, idx, o.Version); err != nil {
		return image.Ref{}, err
	}
	s, err := image.Summarize(idx)
	if err != nil {
		return image.Ref{}, err
	}
	ref := image.Ref{Name: o.Name, Repository: o.Name, Tag: o.Version}
	fmt.Printf("%s:%s  index %s  (oci:%s:%s)\n", o.Name, o.Version, s.Digest, dir, o.Version)
	for _, p := range s.Images {
		fmt.Printf("  %-12s %s  %.1f MiB\n", p.Platform, p.Digest, float64(p.Size)/(1<<20))
	}
	if registry != "" {
		ref.Repository = strings.TrimSuffix(registry, "/") + "/" + o.Name
		pushed, err := image.Push(ctx, ref.Repository+":"+o.Version, idx)
		if err != nil {
			return image.Ref{}, err
		}
		ref.Digest = s.Digest.String()
		fmt.Printf("  pushed %s:%s (%s)\n", ref.Repository, o.Version, pushed)
	}
	if err := os.WriteFile(dir+".ref", []byte(ref.String()+"\n"), 0o644); err != nil {
		return image.Ref{}, err
	}
	return ref, nil
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var ps []v1.Platform
	for _, f := range strings.Split(s, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--platforms %q: %w", f, err)
		}
		ps = append(ps, *p)
	}
	return ps, nil
}
