;; wat2wasm: --no-check
;; steal: an ABI v1 guest that names global 0 and function 4, neither of
;; which it has. Once rewritten, global 0 would be the host's interrupt
;; flag (which "in" clears, so the host could never stop it) and function 4
;; the host's poll function. The host must refuse it. Not valid wasm, so
;; built with wat2wasm --no-check.
(module
  (memory (export "memory") 1)
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64) (i64.const 0))
  (func (export "tinyhost_buffer") (param i32) (result i32) (i32.const 0))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (global.set 0 (i32.const 0))
    (call 4)
    (i64.const 0)))
