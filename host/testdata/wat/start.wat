;; start: an ABI v1 guest by hand with a start section and _initialize,
;; each running a loop of 1000 iterations over memory before any export is
;; called. Every message gets an empty ok.
(module
  (memory (export "memory") 1 1)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")
  (data (i32.const 2048) "\00")
  (global $sum (mut i32) (i32.const 0))

  (func $fill (local $i i32)
    (loop $next
      (i32.store8 (i32.add (i32.const 16384) (local.get $i)) (local.get $i))
      (global.set $sum (i32.add (global.get $sum) (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 1000)))))
  (start $fill)

  (func (export "_initialize") (call $fill))

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 32768))
      (then (i32.const 0))
      (else (i32.const 8192))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 1)))
)
