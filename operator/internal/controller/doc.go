// Package controller holds the operator's two reconcilers and what they
// share. Each status has one writer:
//
//   - modules (module.go) writes TinyModule status. It places each module
//     with internal/placement, remembers the hosts that refused it, and
//     publishes how it runs from what the hosts' status says: placements
//     and their phases, address, version, components, ready replicas,
//     conditions and a summary state. Its finalizer holds a deleted module
//     until every ready host has unloaded it.
//   - hostSync (hostsync.go) writes TinyHost status. It keeps one gRPC
//     connection per host and probes it (hosts.go); it loads what is
//     placed on the host through a Loader (loader.go), unloads what is no
//     longer placed there, and records each module it manages with the
//     hash of the spec it loaded (spec.go), so that nothing is loaded twice
//     for one spec, across operator restarts too.
//
// The two talk only through the API: TinyModule placements are the hosts'
// desired sets, TinyHost status entries are what the hosts run.
package controller
