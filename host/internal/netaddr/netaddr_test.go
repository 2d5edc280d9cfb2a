package netaddr_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tinyhost/tinyhost/host/internal/netaddr"
)

func TestInternal(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1":        "loopback",
		"::1":              "loopback",
		"::ffff:127.0.0.1": "loopback",
		"10.1.2.3":         "private",
		"192.168.0.1":      "private",
		"fd00::1":          "private",
		"::ffff:10.1.2.3":  "private",
		"169.254.169.254":  "link-local",
		"fe80::1":          "link-local",
		"0.0.0.0":          "unspecified",
		"0.1.2.3":          "unspecified",
		"::":               "unspecified",
		"239.1.2.3":        "multicast",
		"100.64.0.1":       "shared (carrier-grade NAT)",
		"203.0.113.9":      "",
		"2001:db8::1":      "",
		"8.8.8.8":          "",
		// IPv6 forms that carry an IPv4 address a translator or tunnel
		// delivers to: NAT64's well-known prefix (RFC 6052), 6to4
		// (RFC 3056) and IPv4-compatible (RFC 4291) addresses.
		"64:ff9b::169.254.169.254": "link-local",
		"64:ff9b::7f00:1":          "loopback",
		"64:ff9b::10.0.0.1":        "private",
		"64:ff9b::8.8.8.8":         "",
		"2002:a9fe:a9fe::1":        "link-local",
		"2002:7f00:1::":            "loopback",
		"2002:808:808::1":          "",
		"::127.0.0.1":              "loopback",
		"::169.254.169.254":        "link-local",
		"64:ff9b::7f00:1%eth0":     "loopback",
		// NAT64's local-use prefix (RFC 8215) embeds at a length each
		// network chooses: internal whatever it carries.
		"64:ff9b:1::a9fe:a9fe": "NAT64 local-use",
	} {
		assert.Equal(t, want, netaddr.Internal(netip.MustParseAddr(addr)), addr)
	}
}
