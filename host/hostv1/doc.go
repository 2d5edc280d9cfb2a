// Package hostv1 is the wire of a tinyhost host: the gRPC API
// tinyhost.host.v1, generated from host.proto by `make proto`.
package hostv1
