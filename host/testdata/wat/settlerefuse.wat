;; settlerefuse: the counter guest (counter.wat) whose handler refuses them (status 8) when its
;; message's payload is the settings of an empty configuration, {}.
(module
  (memory (export "memory") 2)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")

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
    (i32.store8 (i32.const 3000) (i32.const 0))
    (if (i32.and
          (i32.eq (i32.load8_u (i32.add (i32.const 8190) (local.get $n))) (i32.const 0x7b))
          (i32.eq (i32.load8_u (i32.add (i32.const 8191) (local.get $n))) (i32.const 0x7d)))
      (then (i32.store8 (i32.const 3000) (i32.const 8))))
    (i32.store8 (i32.const 3001) (i32.load8_u (i32.const 70000)))
    (i64.or (i64.shl (i64.const 3000) (i64.const 32)) (i64.const 2)))
)
