;; bigtable: an ABI v1 guest that declares a table of 100,000,000 elements
;; (800 MB in the runtime), far more than a module's tables may hold.
(module
  (memory (export "memory") 1)
  (table 100000000 funcref)
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64) (i64.const 0))
  (func (export "tinyhost_buffer") (param i32) (result i32) (i32.const 0))
  (func (export "tinyhost_handle") (param i32) (result i64) (i64.const 0)))
