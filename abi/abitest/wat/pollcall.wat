;; pollcall: an abitest hostile guest, and not a valid module. Module
;; "pollcall", component "p", ports "in" and "ok". It defines four functions
;; (indices 0 to 3), and port in calls function 4: the index a host that
;; appends a function of its own would give it. Validated as it is, the
;; module is refused.
;; `make fixtures` builds pollcall.wasm from this file, without validation:
;; wat2wasm: --no-check
(module
  (memory (export "memory") 2)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"pollcall\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"p\",\"info\":{\"description\":\"Calls the function a host would inject, on in.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  ;; Function 0.
  (func (export "tinyhost_abi_v1"))
  ;; Function 1.
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 242)))
  ;; Function 2. The request buffer is the second page.
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x10000) (i32.gt_u (local.get $size) (i32.const 0x10000))))
  ;; Function 3.
  (func (export "tinyhost_handle") (param i32) (result i64)
    ;; The port's first letter: after the module and component names.
    (if (i32.eq (i32.const 0x69) ;; 'i'
          (i32.load8_u (i32.add (i32.const 0x10003)
            (i32.add (i32.load8_u (i32.const 0x10000))
              (i32.load8_u (i32.add (i32.const 0x10001) (i32.load8_u (i32.const 0x10000))))))))
      (then (call 4)))
    (i64.const 0x200_00000003)))
