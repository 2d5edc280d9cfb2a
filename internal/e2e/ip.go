package e2e

import (
	"net"
	"testing"
)

// LocalIP is an IPv4 address of this machine that is neither loopback nor
// link-local, for hosts whose address must be one an EndpointSlice takes
// (the apiserver refuses loopback endpoints). The test fails on a machine
// without one.
func LocalIP(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ip, _, err := net.ParseCIDR(a.String())
		if err != nil || ip.To4() == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		return ip.String()
	}
	t.Fatalf("no IPv4 address other than loopback and link-local on this machine (have %v)", addrs)
	return ""
}
