package api

// LabelNamespace is the load label (LoadOptions.Labels, the LoadHeader's
// labels) that names the tenant a module was loaded for: the operator
// loads each TinyModule with its Kubernetes namespace there. A module with
// a namespace may message only modules of its own namespace and modules
// with none (the host's own, loaded without the label, and the modules
// the hosts provide): the sending host refuses the rest as it refuses a
// target its messaging grants do not name. A module without the label is
// not checked.
const LabelNamespace = "operator.tinysystems.io/namespace"

// Route is one module's entry in a host's route table: the addresses
// ("host:port") of the hosts where it is ready, and the namespace it was
// loaded for (LabelNamespace), "" for none.
type Route struct {
	Addrs     []string
	Namespace string
}

// OtherNamespace is whether a module of namespace from may not message a
// module of namespace to: both have one, and they differ.
func OtherNamespace(from, to string) bool {
	return from != "" && to != "" && from != to
}
