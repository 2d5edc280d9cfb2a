// Package api is the contract between a tinyhost host and its clients and
// peers, without the runtime and without the wire: what a failed call or
// load is (Kind, CallError, LoadError, VersionError and the Sentinel
// errors), requests and responses, and routing. host/server, host/client,
// host/cluster, the operator and tinyctl all speak it; it imports neither
// wazero nor gRPC, so that a program that only speaks the vocabulary links
// neither. Package host/hostv1 carries it over gRPC (hostv1.ToStatus on the
// serving side, hostv1.FromStatus on the calling side).
//
// Every Kind has one row in one table: its name, the ErrorInfo reason and
// gRPC code (Code, by number) of its status, the ABI status a guest gets
// for it, and its metrics label (Kind.Reason, Kind.Code, Kind.Status,
// Kind.Label).
//
// CheckWire and ParseWireEnd are the check a host's SetWiring makes of each
// wire, here so that the operator leaves out a wire a host would refuse
// instead of sending a table that every host refuses whole.
package api
