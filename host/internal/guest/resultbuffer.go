package guest

import "github.com/tetratelabs/wazero/api"

// ResultBufferType reports whether fn is (i32) -> i32, as
// abi.ExportResultBuffer must be.
func ResultBufferType(fn api.Function) bool {
	d := fn.Definition()
	p, r := d.ParamTypes(), d.ResultTypes()
	return len(p) == 1 && p[0] == api.ValueTypeI32 && len(r) == 1 && r[0] == api.ValueTypeI32
}
