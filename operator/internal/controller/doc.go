// Package controller holds the operator's reconcilers and what they share.
// Each status, and each object, has one writer:
//
//   - modules (module.go, decide.go) writes TinyModule status. It places
//     each module with internal/placement, remembers the hosts that refused
//     it, and publishes how it runs from what the hosts' status says:
//     placements and their phases, address (the module's Service),
//     version, components, ready replicas, conditions, a summary state,
//     and the inventory and generations of status.go. A module a host
//     provides (provided.go) is not placed: its placement is that host.
//     Its finalizer holds a deleted module until every ready host has
//     unloaded it.
//   - hostSync (hostsync.go) writes TinyHost status. It keeps one gRPC
//     connection per host and probes it (hosts.go), and takes a host whose
//     Lease expired for gone (lease.go); it loads what is placed on the
//     host through a Loader (loader.go), unloads what is no longer placed
//     there (never what the host loaded on its own), and records each
//     module it manages with the hash of the spec it loaded (spec.go), so
//     that nothing is loaded twice for one spec, across operator restarts
//     too.
//   - services (service.go) writes each TinyModule's Service and
//     EndpointSlices, from its Ready placements.
//
// They talk only through the API: TinyModule placements are the hosts'
// desired sets, TinyHost status entries are what the hosts run.
package controller
