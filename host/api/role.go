package api

import "strings"

// Role is what a credential may do on a host (see package host/server for
// which RPC needs which role). A client certificate names its roles in its
// Subject Organization (Role.Organization), the Kubernetes convention for
// groups, which cert-manager sets from a Certificate's
// spec.subject.organizations.
type Role string

// The roles. Admin may do everything Invoke may; Peer is apart from both.
const (
	// RoleInvoke calls components and reads what the host runs: Invoke,
	// InvokeStream, Info, ListModules, Watch, health List and Watch.
	RoleInvoke Role = "invoke"
	// RoleAdmin changes the host too: LoadModule, UnloadModule, SetRoutes,
	// SetWiring, and reads its routes and wiring.
	RoleAdmin Role = "admin"
	// RolePeer is host-to-host delivery only: Deliver and DeliverStream.
	RolePeer Role = "peer"
)

// Roles are every role, in the order the errors name them.
var Roles = []Role{RoleAdmin, RoleInvoke, RolePeer}

// OrganizationPrefix starts the Subject Organization of a client
// certificate that names a role: "tinyhost:admin".
const OrganizationPrefix = "tinyhost:"

// Organization is the Subject Organization that grants r to a client
// certificate: "tinyhost:" and the role.
func (r Role) Organization() string { return OrganizationPrefix + string(r) }

// RoleOfOrganization is the role an organization grants, and false for an
// organization that grants none.
func RoleOfOrganization(org string) (Role, bool) {
	name, ok := strings.CutPrefix(org, OrganizationPrefix)
	if !ok {
		return "", false
	}
	for _, r := range Roles {
		if string(r) == name {
			return r, true
		}
	}
	return "", false
}
