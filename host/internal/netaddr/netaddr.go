// Package netaddr tells the addresses a fetch or a module's outbound
// request must not reach unless told: loopback, private, link-local and
// the like, where a host's own ports and its network's services live.
package netaddr

import "net/netip"

// Networks internal besides what netip's predicates name: shared address
// space (carrier-grade NAT, RFC 6598) and "this network" (0.0.0.0/8).
var (
	sharedNet = netip.MustParsePrefix("100.64.0.0/10")
	thisNet   = netip.MustParsePrefix("0.0.0.0/8")
)

// Internal names why ip is internal ("loopback", "private", ...); "" for a
// public address. An IPv4-mapped IPv6 address is judged as its IPv4 one.
func Internal(ip netip.Addr) string {
	switch ip = ip.Unmap(); {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsUnspecified(), thisNet.Contains(ip):
		return "unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case sharedNet.Contains(ip):
		return "shared (carrier-grade NAT)"
	}
	return ""
}
