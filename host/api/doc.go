// Package api is the contract between a tinyhost host and its clients and
// peers, without the runtime: what a failed call or load is (Kind,
// CallError, LoadError, VersionError and the Sentinel errors), and how
// those errors cross gRPC both ways (ToStatus on the serving side,
// FromStatus on the calling side). host/server, host/client, host/cluster,
// the operator and tinyctl all speak it; it imports neither wazero nor the
// gRPC server, so that a client does not link the runtime it talks to.
//
// Every Kind has one row in one table: its name, the ErrorInfo reason and
// gRPC code of its status, the ABI status a guest gets for it, and its
// metrics label (Kind.Reason, Kind.Code, Kind.Status, Kind.Label).
//
// A status made by ToStatus carries a google.rpc.ErrorInfo detail of
// domain ErrorDomain whose metadata names the module, component and port
// and the wrapped error's message (MetaCause), so that FromStatus rebuilds
// the typed error without reading the status message. Stream responses
// carry the same google.rpc.Status.
//
// CheckWire and ParseWireEnd are the check a host's SetWiring makes of each
// wire, here so that the operator leaves out a wire a host would refuse
// instead of sending a table that every host refuses whole.
package api
