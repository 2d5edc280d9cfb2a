;; bigtable: an abitest hostile guest. Module "bigtable", component "s", port
;; "ok". It declares a funcref table of 100,000,000 slots (800 MB in a host
;; that keeps a slot in 8 bytes), which a host must count against the
;; module's memory limit: the load fails with a memory error.
;; `make fixtures` builds bigtable.wasm from this file.
(module
  (memory (export "memory") 2)
  (table 100000000 funcref)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"bigtable\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"s\",\"info\":{\"description\":\"Declares a table of 100,000,000 slots.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 200)))
  ;; The request buffer is the second page.
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x10000) (i32.gt_u (local.get $size) (i32.const 0x10000))))
  ;; Every port answers ok, "ok": the response at 0x200, 3 bytes.
  (func (export "tinyhost_handle") (param i32) (result i64)
    (i64.const 0x200_00000003)))
