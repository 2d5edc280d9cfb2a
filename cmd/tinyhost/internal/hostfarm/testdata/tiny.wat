;; tiny: the smallest module the operator's scale benchmark places, so that
;; a thousand of them fit on a hundred hosts without memory being the
;; limit. Module "tiny", component "echo": every call answers "ok".
;; One page of memory; the request buffer is its second half.
;; `make fixtures` builds tiny.wasm from this file.
(module
  (memory (export "memory") 1)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"tiny\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"echo\",\"info\":{\"description\":\"Answers ok.\",\"tags\":[\"bench\"]},\"ports\":[{\"name\":\"in\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 170)))
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x8000) (i32.gt_u (local.get $size) (i32.const 0x8000))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (i64.const 0x200_00000003)))
