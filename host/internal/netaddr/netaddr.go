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

	// IPv6 prefixes whose addresses carry an IPv4 address that a
	// translator or a tunnel delivers to: NAT64's well-known prefix
	// (RFC 6052), 6to4 (RFC 3056) and IPv4-compatible addresses (RFC
	// 4291, which a Linux sit device still routes).
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	compat4 = netip.MustParsePrefix("::/96")
	// NAT64's local-use prefix (RFC 8215) carries an IPv4 address at a
	// length each network chooses.
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
)

// Internal names why ip is internal ("loopback", "private", ...); "" for a
// public address. An IPv4-mapped IPv6 address is judged as its IPv4 one,
// and so is one of NAT64, 6to4 or IPv4-compatible, which reaches the IPv4
// address it carries where a translator or tunnel runs.
func Internal(ip netip.Addr) string {
	if kind := internal(ip); kind != "" {
		return kind
	}
	if ip = ip.WithZone(""); ip.Is6() { // a prefix contains no zoned address
		b := ip.As16()
		switch {
		case nat64.Contains(ip), compat4.Contains(ip):
			return internal(netip.AddrFrom4([4]byte(b[12:16])))
		case sixTo4.Contains(ip):
			return internal(netip.AddrFrom4([4]byte(b[2:6])))
		case nat64Local.Contains(ip):
			return "NAT64 local-use"
		}
	}
	return ""
}

func internal(ip netip.Addr) string {
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
