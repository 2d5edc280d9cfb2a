;; baddesc: an ABI v1 guest by hand whose _initialize fills a run of its
;; memory and whose descriptor is not JSON: its load fails at describe,
;; after its initialisation ran.
(module
  (memory (export "memory") 2)
  (data (i32.const 1024) "{not json")

  (func (export "_initialize") (local $i i32)
    (loop $next
      (i32.store8 (i32.add (i32.const 16384) (local.get $i)) (i32.const 7))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 1000)))))

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 9)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (i32.const 8192))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (i64.const 0))
)
