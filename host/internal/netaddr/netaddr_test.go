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
	} {
		assert.Equal(t, want, netaddr.Internal(netip.MustParseAddr(addr)), addr)
	}
}
