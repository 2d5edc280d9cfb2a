;; bufferloop: an abitest hostile guest. Module "bufferloop", component "s",
;; port "ok". Its tinyhost_buffer loops forever, so the first message to an
;; instance (_settings, while the module loads) never gets a buffer.
;; `make fixtures` builds bufferloop.wasm from this file.
(module
  (memory (export "memory") 2)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"bufferloop\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"s\",\"info\":{\"description\":\"Loops forever in tinyhost_buffer.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 197)))
  (func (export "tinyhost_buffer") (param i32) (result i32)
    (loop $forever (br $forever))
    (unreachable))
  ;; Every port answers ok, "ok": the response at 0x200, 3 bytes.
  (func (export "tinyhost_handle") (param i32) (result i64)
    (i64.const 0x200_00000003)))
