// Package controller holds the operator's reconcilers and what they share.
// Setup adds them to a manager. Each status, and each object, has one
// writer: the module controller writes TinyModule status, the host sync
// TinyHost status, the services controller each module's Service and
// EndpointSlices.
//
// # Modules
//
// modules (module.go, decide.go) writes TinyModule status. It places each
// module with internal/placement, remembers the hosts that refused it, and
// publishes how it runs from what the hosts' status says: placements and
// their phases, address (the module's Service), version, components, ready
// replicas, conditions, a summary state, and the inventory and generations
// of status.go. A module a host provides (provided.go) is not placed: its
// placement is that host.
//
// Moves are make-before-break (leaving in decide.go): a replica leaving a
// host stays there, Draining and routed, until its replacement is Ready,
// then Unloading, out of the routes. A spec change rolls out in place in
// steps of spec.strategy (rollout and placed): replicas not reached yet
// keep the spec they run (placement specHash), which the host sync leaves
// loaded. Its finalizer holds a deleted module until every ready host has
// unloaded it.
//
// # Hosts
//
// hostSync (hostsync.go) writes TinyHost status. It keeps one gRPC
// connection per host and probes it (hosts.go) every ProbeInterval, and at
// once when the connection closes: a host that then refuses connections is
// NotReady without waiting for FailureThreshold failed probes. Probes ask
// hosts for a summary (Info without descriptors). A TinyHost whose address
// answers with another host's name is NotReady (probe.Other). It takes a
// host whose Lease expired for gone (lease.go).
//
// It loads what is placed on the host through a Loader (loader.go), and
// unloads what is no longer placed there (never what the host loaded on
// its own) once no live host's route table routes to it there, a minute at
// most (routeBook, routeWait, routes.go). It records each module it manages
// with the hash of the spec it loaded (spec.go), and loads with labels the
// host keeps (v1alpha1.LabelModuleNamespace, LabelSpecHash), so that
// nothing is loaded twice for one spec, across operator restarts and a
// cache behind too.
//
// A load's entry is written when it is over, or Loading once it runs past
// progressAfter: a load runs beside the convergence, under the host's
// connection with its own deadline, and one still running then is recorded
// by the host's next convergence, once it ends (loading.go), so that a hung
// artifact holds no other module. A convergence loads in rounds, and the
// write that records a round's loads lists the modules placed on the host
// meanwhile, the next round's (arrived).
//
// # Routes and wiring
//
// The route table and wiring (tables, shared.go) go to every ready host
// from a pusher (pusher.go), once per burst of changes, apart from the host
// sync, in messages of MaxTableBytes at most (setRoutes sends a larger
// route table in parts). The module status and the tables share the wiring
// bounds (wiring.go): a namespace over its share of the hosts' wiring has
// none of its wires sent and its modules Wired=False. Wired=True waits for
// each host that runs the module to have accepted its wires (conn.pushed,
// conn.wiresAccepted): a push's answer that changes what a host has brings
// back the modules placed on it.
//
// # Services and secrets
//
// services (service.go) writes each TinyModule's Service and
// EndpointSlices, from its Ready placements. secretPush (secrets.go) sends
// a module's Secrets to the hosts that run it when one of them changes; it
// watches Secrets by their metadata only and caches no Secret's data.
//
// # Sharding
//
// Without Options.Shards, the manager's leader election lets one operator
// run the controllers. With it, every replica runs them, and each
// reconcile is gated on a shard Lease this replica holds (package
// internal/shard, which the controllers see only as a gate: gate.go): a
// host's for the host sync (probes, loads, unloads, table pushes and
// TinyHost status of that host), a bucket's (of 16, hashed from
// namespace/name) for modules and services. One writer at a time: a
// reconcile runs under a context that ends when the Lease is lost or the
// renew deadline since its last renewal passes, before anyone else may take
// it; a Lease is released only after the reconciles under way returned;
// whoever takes a shard enqueues all its objects.
//
// The route table is still built from every module, and pushed by each
// replica to the hosts it owns (the pusher holds each host's shard for its
// push); an unload waits on the route tables of the hosts of the other
// replicas too (peerRoutes in peers.go reads them with GetRoutes). The
// placement decisions of two replicas are not serialized: a host may be
// asked for more than its capacity for a moment; it refuses the load
// (CAPACITY, a refusal for good, permanent in spec.go) and the module is
// placed elsewhere.
//
// # Concurrency and events
//
// Each controller runs Options.MaxConcurrentReconciles workers;
// controller-runtime never runs one object's reconciles at once. What they
// share is safe for that: the module controller takes its placement
// decisions one at a time within a replica (modules.placing) and records
// them in the ledger (shared.go) before it writes them; the host sync's
// connections (hosts.go) and the route table (tables, shared.go) have their
// own locks.
//
// An event brings back what it concerns: a module's change the hosts it
// was or is placed on (an index of modules by placement host); a host's
// status the modules whose entries changed, and its probe time alone none.
// A host whose readiness changed, the modules of a host that stopped being
// Ready, and a module whose load on a host just ended go ahead of the rest
// (controller-runtime's priority queue).
//
// # What the controllers know
//
// The controllers decide only from the API: TinyModule placements are the
// hosts' desired sets, TinyHost status entries are what the hosts run.
// Besides, they share one cache in memory, descriptors (shared.go): the
// version and components each host reported for a wasm digest, which the
// host sync fills from LoadModule, and from ListModules for a digest it has
// not seen loaded, and modules reads to publish a module's version and
// components, so that TinyHost status need not carry every component of
// every module. A digest names bytes, so an entry never goes stale; an
// operator restarted with an empty cache keeps the components published
// before, and the version of the host's status entry, until its host sync
// has listed that host's modules.
//
// # Tracing
//
// With Options.TracerProvider, each reconcile runs in a span of its own
// (trace.go), and the gRPC calls it makes to hosts are its children.
package controller
