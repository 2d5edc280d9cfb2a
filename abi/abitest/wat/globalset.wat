;; globalset: an abitest hostile guest, and not a valid module. Module
;; "globalset", component "g", ports "in" and "ok". It defines one global
;; (index 0), and port in loops setting global 1 to 0: the index a host that
;; appends its own interrupt global would give it. Validated as it is, the
;; module is refused; validated only after such a rewrite, it would reset
;; its own interruption forever.
;; `make fixtures` builds globalset.wasm from this file, without validation:
;; wat2wasm: --no-check
(module
  (memory (export "memory") 2)
  (global $own (mut i32) (i32.const 0))
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"globalset\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"g\",\"info\":{\"description\":\"Sets the global a host would inject, on in.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 240)))
  ;; The request buffer is the second page.
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x10000) (i32.gt_u (local.get $size) (i32.const 0x10000))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    ;; The port's first letter: after the module and component names.
    (if (i32.eq (i32.const 0x69) ;; 'i'
          (i32.load8_u (i32.add (i32.const 0x10003)
            (i32.add (i32.load8_u (i32.const 0x10000))
              (i32.load8_u (i32.add (i32.const 0x10001) (i32.load8_u (i32.const 0x10000))))))))
      (then
        (loop $forever
          (global.set 1 (i32.const 0))
          (global.set $own (i32.add (global.get $own) (i32.const 1)))
          (br $forever))))
    (i64.const 0x200_00000003)))
