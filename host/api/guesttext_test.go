package api_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/tinyhost/tinyhost/host/api"
)

func TestGuestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a plain line", "a plain line"},
		{"two\nlines", `two\nlines`},
		{"ok\n2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged: module=other", `ok\n2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged: module=other`},
		{"\x1b[2K\rhidden", `\x1b[2K\rhidden`},
		{"nul\x00tab\tdel\x7f", `nul\x00tab\tdel\x7f`},
		{"bad \xff\xfe utf-8", `bad \xff\xfe utf-8`},
		{`back\slash`, `back\\slash`},
		{"héllo, 世界", "héllo, 世界"},
		{"c1 \u009b csi, line sep \u2028, rlo \u202e", `c1 \u009b csi, line sep \u2028, rlo \u202e`},
		{"tag \U000e0041", `tag \U000e0041`},
		{`quote " stays`, `quote " stays`},
	} {
		assert.Equal(t, tc.want, api.GuestText(tc.in), "%q", tc.in)
		assert.Equal(t, tc.want, api.GuestText([]byte(tc.in)), "%q", tc.in)
	}
}

func TestGuestTextBound(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("a", 4<<20),
		strings.Repeat("\x1b", 1<<20),
		strings.Repeat("世", 100_000),
		strings.Repeat("\u2028", 100_000),
		strings.Repeat("a", api.MaxGuestText-1) + "\n",
	} {
		out := api.GuestText(in)
		assert.LessOrEqual(t, len(out), api.MaxGuestText)
		assert.True(t, utf8.ValidString(out))
		assert.NotContains(t, out, "\n")
		assert.Contains(t, out, " bytes more)")
	}
	exact := strings.Repeat("a", api.MaxGuestText)
	assert.Equal(t, exact, api.GuestText(exact), "text of exactly the bound is whole")
	assert.Equal(t, "aaaaaaaaaaaa… (88 bytes more)", api.GuestTextN(strings.Repeat("a", 100), 32))
}

func BenchmarkGuestText(b *testing.B) {
	for _, bc := range []struct{ name, line string }{
		{"plain", "handled order 81723 for customer 4411 in 3.2ms: 17 items, total 1024.50 EUR"},
		{"escaped", "handled order 81723\tfor customer \"4411\"\nin 3.2ms: 17 items, total 1024.50 €"},
	} {
		line := []byte(bc.line)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				_ = api.GuestText(line)
			}
		})
	}
}
