//go:build !wasip1

package sdk

import (
	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/sdk/internal/bridge"
)

// platform: natively the host functions go to the host that sdktest
// installs, which answers a call with its result at once; platform keeps
// the result that did not fit the guest's buffer, as a host does.
type platform struct {
	host bridge.Host
	// grownBuf is the result too long for the call's buffer, which the
	// harness, like a host, writes into a region of the guest's
	// (abi.ExportResultBuffer) rather than keep pending.
	grownBuf []byte
}

// grown is the result of n bytes of the last host call when it did not
// fit the call's buffer.
func (in *instance) grown(n uint32) []byte {
	b := in.grownBuf
	in.grownBuf = nil
	if uint32(len(b)) < n {
		return nil
	}
	return b[:n]
}

func (in *instance) hostcall(fn hostFunc, req, out []byte) uint64 {
	if fn == fnResult {
		// Nothing is pending: a result too long for the call's buffer
		// went to grownBuf.
		return abi.PackResult(abi.StatusBadRequest, 0)
	}
	s, res := abi.StatusUnavailable, []byte("sdk: no host: run components natively through sdk/sdktest")
	if in.host != nil {
		s, res = in.host.Call(hostFuncNames[fn], req)
	}
	in.grownBuf = nil
	if len(res) > len(out) {
		in.grownBuf = append([]byte(nil), res...)
		return abi.PackResult(s, uint32(len(res)))
	}
	return abi.PackResult(s, uint32(copy(out, res)))
}

// minLogLevel: natively every line goes to the sdktest harness.
const minLogLevel = abi.LogTrace

func (in *instance) hostlog(level abi.LogLevel, line []byte) {
	if in.host != nil {
		in.host.Log(level, line)
	}
}

// nativeInstance adapts an instance to bridge.Instance.
type nativeInstance struct{ in instance }

func (n *nativeInstance) Handle(req []byte) []byte {
	copy(n.in.buffer(len(req)), req)
	return n.in.handle(len(req))
}

func init() {
	bridge.NewInstance = func(h bridge.Host) bridge.Instance {
		n := &nativeInstance{}
		n.in.host = h
		return n
	}
	bridge.Describe = func() []byte { return reg.descriptor }
	bridge.HostOf = func(c any) (bridge.Host, bool) {
		ctx, _ := c.(*Context)
		if ctx == nil || ctx.comp == nil || ctx.in.host == nil {
			return nil, false
		}
		return ctx.in.host, true
	}
}
