;; bigmem: an ABI v1 guest by hand that declares 5000 pages (312.5 MiB) of
;; initial memory, above the host's default limit of 4096 pages. Loading it
;; must fail with a memory-limit error for it alone.
(module
  (memory (export "memory") 5000)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")
  (data (i32.const 2048) "\00")

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (i32.const 8192))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 1)))
)
