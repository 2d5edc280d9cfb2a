package server_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/host/server"
)

// FuzzGuestText feeds arbitrary bytes everywhere guest text goes: as every
// string of a module's entry (descriptor, source, labels, capabilities)
// and as a raw schema, every listing encodes; as a port schema in a
// descriptor, the descriptor is refused or every string in it is UTF-8;
// as a log line, the host writes one line with no control character; as
// the reason of a failed call, the status and its details encode. The
// seed corpus is in testdata/fuzz/FuzzGuestText.
func FuzzGuestText(f *testing.F) {
	for _, s := range []string{
		"a plain line",
		"ok\n2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged: module=other\x1b[2K\r\x00\xff\xfe end\n",
		`{"title":"\xff"}`,
		"\u009b\u2028\u202e\\",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := string(b)

		// A module's entry, every text of it the fuzzer's.
		info := host.ModuleInfo{
			Name: s, Version: s, Source: s, Digest: s,
			Capabilities: []string{s},
			Labels:       map[string]string{s: s, "k": s},
			Descriptor: abi.Descriptor{ABI: 1, Name: s, Version: s, Components: []abi.Component{{
				Name:  s,
				Info:  abi.ComponentInfo{Description: s, Tags: []string{s, "t"}},
				Ports: []abi.Port{{Name: s, Direction: abi.Direction(s), Schema: b}},
			}}},
		}
		m, _ := server.ModuleProto(&info)
		for _, msg := range []proto.Message{
			&hostv1.ListModulesResponse{Modules: []*hostv1.Module{m}},
			&hostv1.InfoResponse{Modules: []*hostv1.Module{m}},
			&hostv1.WatchEvent{Module: hostv1.WireText(s), Info: m, Error: hostv1.WireText(s)},
		} {
			_, err := proto.Marshal(msg)
			require.NoError(t, err, "a listing that does not encode")
		}

		// The same bytes as a schema, a tag and a version of a descriptor.
		var doc bytes.Buffer
		doc.WriteString(`{"abi":1,"name":"m","version":"`)
		doc.Write(b)
		doc.WriteString(`","components":[{"name":"c","info":{"tags":["`)
		doc.Write(b)
		doc.WriteString(`"]},"ports":[{"name":"p","direction":"input","schema":`)
		doc.Write(b)
		doc.WriteString(`}]}]}`)
		if d, err := abi.ParseDescriptor(doc.Bytes()); err == nil {
			require.True(t, utf8.ValidString(d.Version))
			require.True(t, utf8.ValidString(d.Components[0].Info.Tags[0]))
			require.True(t, utf8.Valid(d.Components[0].Ports[0].Schema))
		} else {
			require.NotContains(t, err.Error(), "\n", "the error of a descriptor is one line")
		}

		// As a log line and a reason, written as the host writes them.
		var out bytes.Buffer
		log := hclog.New(&hclog.LoggerOptions{Name: "tinyhost", Output: &out, Level: hclog.Info})
		log.Info("guest log", "module", "m", "line", api.GuestText(b))
		log.Warn("tick failed", "module", "m", "error", api.GuestText(s))
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		require.Len(t, lines, 2, "the host wrote other lines than its two: %q", out.String())
		for _, l := range lines {
			require.True(t, utf8.ValidString(l))
			for _, r := range l {
				require.False(t, r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0, "control character %U in %q", r, l)
			}
			require.LessOrEqual(t, len(l), 2*api.MaxGuestText, "a line longer than its text's bound")
		}

		st := hostv1.ToStatus(&api.CallError{Module: "m", Component: "c", Port: "p", Kind: api.KindHandler, Err: errors.New(s)})
		_, err := proto.Marshal(st.Proto())
		require.NoError(t, err, "a status that does not encode")
		require.NotNil(t, hostv1.ErrorInfo(st), "a status without its details")
	})
}
