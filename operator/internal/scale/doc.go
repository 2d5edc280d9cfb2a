// Package scale measures the operator at the size of a cluster: a hundred
// real hosts, a thousand modules. Its benchmark (bench_test.go) runs the
// operator's binary against a real apiserver and etcd, and the hosts as
// tinyhost daemons, several to a process (cmd/tinyhost/internal/hostfarm),
// each with its own gRPC server and Lease; it reports, in what `make bench`
// prints, how long a thousand modules take from apply to Ready, how long
// the modules of ten killed hosts take to be Ready elsewhere, the
// operator's peak memory and its apiserver requests per module.
package scale
