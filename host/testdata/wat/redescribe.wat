;; redescribe: the counter guest (counter.wat) whose tinyhost_describe
;; counts its runs in the instance's memory: its first run describes
;; version 1.0.0, any later run 2.0.0 (same length). Each instance is
;; described at most once by a host that starts every instance fresh, so
;; every load of these bytes describes 1.0.0 there.
(module
  (memory (export "memory") 2)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")
  (data (i32.const 1536) "{\"abi\":1,\"name\":\"wat\",\"version\":\"2.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")

  (func (export "_initialize")
    (i32.store (i32.const 70000) (i32.const 10)))

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64) (local $n i32)
    (local.set $n (i32.load (i32.const 70004)))
    (i32.store (i32.const 70004) (i32.add (local.get $n) (i32.const 1)))
    (i64.or
      (i64.shl (i64.extend_i32_u (select (i32.const 1024) (i32.const 1536) (i32.eqz (local.get $n)))) (i64.const 32))
      (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 32768))
      (then (i32.const 0))
      (else (i32.const 8192))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (i32.store (i32.const 70000) (i32.add (i32.load (i32.const 70000)) (i32.const 1)))
    (i32.store8 (i32.const 3000) (i32.const 0))
    (i32.store8 (i32.const 3001) (i32.load8_u (i32.const 70000)))
    (i64.or (i64.shl (i64.const 3000) (i64.const 32)) (i64.const 2)))
)
