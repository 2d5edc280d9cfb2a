;; startloop: an ABI v1 guest whose start function loops forever. The
;; start function runs before any export; only the host's deadline ends it.
(module
  (memory (export "memory") 1)
  (func $spin (loop $l (br $l)))
  (start $spin)
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64) (i64.const 0))
  (func (export "tinyhost_buffer") (param i32) (result i32) (i32.const 0))
  (func (export "tinyhost_handle") (param i32) (result i64) (i64.const 0)))
