// Package v1alpha1 holds the operator's API, group operator.tinysystems.io,
// version v1alpha1.
//
// A TinyModule asks for a module to run: the wasm artifact (spec.image, an
// OCI reference, or spec.source, an https URL with its sha256), how many
// hosts to run it on and which, and how to load it there. Its status is the
// one the Tiny Systems docs publish for module discovery (address, version,
// components) plus where the module runs and how well.
//
// A TinyHost is one host process: its gRPC address in spec, and in status
// whether it answers, what it can load, and what it has loaded.
//
// The deepcopy code and the CRD manifests are generated from the markers in
// this package by the pinned controller-gen (make generate manifests).
//
// +kubebuilder:object:generate=true
// +groupName=operator.tinysystems.io
package v1alpha1
