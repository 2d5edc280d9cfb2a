;; grow: an ABI v1 guest by hand whose handler grows its memory by a page
;; (up to its maximum, 16 pages) and its table by 1000 slots on every
;; message, then replies with an empty ok.
(module
  (memory (export "memory") 1 16)
  (table $t 1 funcref)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")
  (data (i32.const 2048) "\00")

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 32768))
      (then (i32.const 0))
      (else (i32.const 8192))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (drop (memory.grow (i32.const 1)))
    (drop (table.grow $t (ref.null func) (i32.const 1000)))
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 1)))
)
