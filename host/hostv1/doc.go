// Package hostv1 is the wire of a tinyhost host: the gRPC API
// tinyhost.host.v1, generated from host.proto by `make proto`, and in
// convert.go every conversion between its messages and the vocabulary of
// package host/api: errors and gRPC statuses, messages, requests and
// responses, route and wiring tables.
//
// A status made by ToStatus carries a google.rpc.ErrorInfo detail of
// domain ErrorDomain whose metadata names the module, component and port
// and the wrapped error's message (MetaCause), so that FromStatus rebuilds
// the typed error without reading the status message. Stream responses
// carry the same google.rpc.Status.
package hostv1
