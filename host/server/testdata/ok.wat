;; ok answers "ok" to every call on port "in" of component "ok" without
;; reading the request: the cheapest guest a call can reach, so that a
;; benchmark against it measures the host and the server alone.
(module
  (memory (export "memory") 1)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"ok\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"ok\",\"info\":{\"description\":\"Answers ok.\",\"tags\":[\"bench\"]},\"ports\":[{\"name\":\"in\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 166)))
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x8000) (i32.gt_u (local.get $size) (i32.const 0x8000))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (i64.const 0x200_00000003)))
