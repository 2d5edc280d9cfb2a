;; spread: an ABI v1 guest by hand whose _initialize writes one non-zero
;; byte every 4097 bytes of its 1024 pages (64 MiB): its image holds 16 KiB
;; of non-zero bytes, one in nearly every page of the system. Each message
;; gets an ok whose payload is the byte at 4097.
(module
  (memory (export "memory") 1024)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"spread\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")

  (func (export "_initialize") (local $a i32)
    (local.set $a (i32.const 4097))
    (loop $next
      (i32.store8 (local.get $a) (i32.const 1))
      (local.set $a (i32.add (local.get $a) (i32.const 4097)))
      (br_if $next (i32.lt_u (local.get $a) (i32.const 67108864)))))

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 151)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 3000))
      (then (i32.const 0))
      (else (i32.const 8192))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (i32.store8 (i32.const 3000) (i32.const 0))
    (i32.store8 (i32.const 3001) (i32.load8_u (i32.const 4097)))
    (i64.or (i64.shl (i64.const 3000) (i64.const 32)) (i64.const 2)))
)
