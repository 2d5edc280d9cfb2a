;; settletimer: an ABI v1 guest by hand whose settings of an empty
;; configuration, {}, set a 20 ms timer for its component c (a default
;; interval); each tick adds one to a count. A message on c/in gets an ok
;; whose payload is the tick count's low byte and the status of the last
;; timer call (255: none yet).
(module
  (import "tinyhost_v1" "timer" (func $timer (param i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 2)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")
  (data (i32.const 1300) "\01c\14") ;; Timer (ABI.md 4.3): c, 20 ms

  (func (export "_initialize")
    (i32.store8 (i32.const 70008) (i32.const 255)))

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 32768))
      (then (i32.const 0))
      (else (i32.const 8192))))

  ;; port is the address of the request's port name (ABI.md 4.1): after
  ;; the module's name and the component's, each after its length byte.
  (func $port (result i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 8193) (i32.load8_u (i32.const 8192))))
    (i32.add (i32.add (local.get $p) (i32.const 2)) (i32.load8_u (local.get $p))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (local $p i32)
    (local.set $p (call $port))
    (if (i32.and
          (i32.eq (i32.load8_u (i32.add (i32.const 8190) (local.get $n))) (i32.const 0x7b))
          (i32.eq (i32.load8_u (i32.add (i32.const 8191) (local.get $n))) (i32.const 0x7d)))
      (then
        (i32.store8 (i32.const 70008)
          (i32.wrap_i64 (i64.shr_u
            (call $timer (i32.const 1300) (i32.const 3) (i32.const 2100) (i32.const 1000))
            (i64.const 32))))))
    (if (i32.and
          (i32.eq (i32.load8_u (local.get $p)) (i32.const 0x5f))
          (i32.eq (i32.load8_u (i32.add (local.get $p) (i32.const 1))) (i32.const 0x74)))
      (then (i32.store (i32.const 70004) (i32.add (i32.load (i32.const 70004)) (i32.const 1)))))
    (i32.store8 (i32.const 3000) (i32.const 0))
    (i32.store8 (i32.const 3001) (i32.load8_u (i32.const 70004)))
    (i32.store8 (i32.const 3002) (i32.load8_u (i32.const 70008)))
    (i64.or (i64.shl (i64.const 3000) (i64.const 32)) (i64.const 3)))
)
