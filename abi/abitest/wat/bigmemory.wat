;; bigmemory: an abitest hostile guest. Module "bigmemory", component "s",
;; port "ok". It declares an initial memory of 5000 pages (312.5 MiB), above
;; a limit of 4096 pages: the load must fail with a memory error, not crash.
;; `make fixtures` builds bigmemory.wasm from this file.
(module
  (memory (export "memory") 5000)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"bigmemory\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"s\",\"info\":{\"description\":\"Declares 5000 pages of memory.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 193)))
  ;; The request buffer is the second page.
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x10000) (i32.gt_u (local.get $size) (i32.const 0x10000))))
  ;; Every port answers ok, "ok": the response at 0x200, 3 bytes.
  (func (export "tinyhost_handle") (param i32) (result i64)
    (i64.const 0x200_00000003)))
