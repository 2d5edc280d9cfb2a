;; settlelog: the counter guest (counter.wat), whose handler also logs
;; "settings" through the log host function when its message's last byte
;; is "}" (its settings, {}): its settings act on the outside, so a
;; snapshot may not hold them.
(module
  (import "tinyhost_v1" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")
  (data (i32.const 2064) "settings")

  (func (export "_initialize")
    (i32.store (i32.const 70000) (i32.const 10)))

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 32768))
      (then (i32.const 0))
      (else (i32.const 8192))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (i32.store (i32.const 70000) (i32.add (i32.load (i32.const 70000)) (i32.const 1)))
    (if (i32.eq (i32.load8_u (i32.add (i32.const 8191) (local.get $n))) (i32.const 0x7d))
      (then (call $log (i32.const 2) (i32.const 2064) (i32.const 8))))
    (i32.store8 (i32.const 3000) (i32.const 0))
    (i32.store8 (i32.const 3001) (i32.load8_u (i32.const 70000)))
    (i64.or (i64.shl (i64.const 3000) (i64.const 32)) (i64.const 2)))
)
