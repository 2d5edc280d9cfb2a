;; timers sets timers for its components, by the first letter of the port
;; of c0 (ticks and settings, on "_" ports, do nothing):
;;   set   a 1 s timer for each of c0, c1 and c2
;;   fast  a 1 ms timer for c0
;; The answer is ok with the status of each timer call, one byte each, then
;; the reason the host gave with the last one.
(module
  (import "tinyhost_v1" "timer" (func $timer (param i32 i32 i32 i32) (result i64)))
  ;; 0..4095: descriptor, timer requests, response; 4096..: request buffer.
  (memory (export "memory") 1)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"timers\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c0\",\"ports\":[{\"name\":\"set\",\"direction\":\"input\"},{\"name\":\"fast\",\"direction\":\"input\"}]},{\"name\":\"c1\"},{\"name\":\"c2\"}]}")
  (data (i32.const 1100) "\02c0\e8\07") ;; Timer (ABI.md 4.3): c0, 1000 ms
  (data (i32.const 1110) "\02c1\e8\07")
  (data (i32.const 1120) "\02c2\e8\07")
  (data (i32.const 1130) "\02c0\01")    ;; c0, 1 ms
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x00000100000000B5)) ;; descriptor at 256, 181 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  ;; port returns the first byte of the request's port (ABI.md 4.1).
  (func $port (result i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
  ;; set calls the timer import with the request at req, of n bytes; it
  ;; stores the status at at, and the reason at 2100, and returns the
  ;; reason's length (0 when it is longer than 1000 bytes, and so pending).
  (func $set (param $req i32) (param $n i32) (param $at i32) (result i32)
    (local $r i64) (local $len i32)
    (local.set $r (call $timer (local.get $req) (local.get $n) (i32.const 2100) (i32.const 1000)))
    (i32.store8 (local.get $at) (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))))
    (local.set $len (i32.wrap_i64 (local.get $r)))
    (select (local.get $len) (i32.const 0) (i32.le_u (local.get $len) (i32.const 1000))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (local $c i32) (local $n i32) (local $len i32)
    (local.set $c (call $port))
    (i32.store8 (i32.const 2048) (i32.const 0))
    (if (i32.eq (local.get $c) (i32.const 115)) ;; s
      (then
        (drop (call $set (i32.const 1100) (i32.const 5) (i32.const 2049)))
        (drop (call $set (i32.const 1110) (i32.const 5) (i32.const 2050)))
        (local.set $n (call $set (i32.const 1120) (i32.const 5) (i32.const 2051)))
        (memory.copy (i32.const 2052) (i32.const 2100) (local.get $n))
        (local.set $len (i32.add (i32.const 4) (local.get $n)))))
    (if (i32.eq (local.get $c) (i32.const 102)) ;; f
      (then
        (local.set $n (call $set (i32.const 1130) (i32.const 4) (i32.const 2049)))
        (memory.copy (i32.const 2050) (i32.const 2100) (local.get $n))
        (local.set $len (i32.add (i32.const 2) (local.get $n)))))
    (if (i32.eqz (local.get $len))
      (then (local.set $len (i32.const 1))))
    ;; packed (2048, len)
    (i64.or (i64.const 0x0000080000000000) (i64.extend_i32_u (local.get $len)))))
