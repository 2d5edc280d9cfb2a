;; recurse: an ABI v1 guest by hand whose handler recurses without a loop:
;; f(d) calls f(d-1) twice, from d = 10 (2047 calls). Every message gets an
;; empty ok once the recursion returns.
(module
  (memory (export "memory") 1 1)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")
  (data (i32.const 2048) "\00")

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 32768))
      (then (i32.const 0))
      (else (i32.const 8192))))

  (func $f (param $d i32)
    (if (local.get $d)
      (then
        (call $f (i32.sub (local.get $d) (i32.const 1)))
        (call $f (i32.sub (local.get $d) (i32.const 1))))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (call $f (i32.const 10))
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 1)))
)
