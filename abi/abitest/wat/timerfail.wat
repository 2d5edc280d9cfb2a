;; timerfail: an abitest hostile guest. Module "timerfail", component "t",
;; port "ok". When its settings are not {} (the configuration has a member
;; "t"), _settings asks for a timer every 10 ms and then traps, so the load
;; fails after the timer was set: a host must not keep it. On _tick it logs
;; "tick" at info.
;; `make fixtures` builds timerfail.wasm from this file.
(module
  (import "tinyhost_v1" "timer" (func $host_timer (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x210) "tick")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"timerfail\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"t\",\"info\":{\"description\":\"Sets a timer in _settings, then traps.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 201)))
  ;; The request buffer is the second page.
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x10000) (i32.gt_u (local.get $size) (i32.const 0x10000))))
  ;; $port returns byte $i of the request's port name. A request starts
  ;; with the module, component and port names, each a one-byte length and
  ;; its bytes (ABI.md 4.1: names are at most 63 bytes).
  (func $port (param $i i32) (result i32)
    (local $p i32)
    (local.set $p (i32.const 0x10000))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (i32.load8_u (i32.add (i32.add (local.get $p) (i32.const 1)) (local.get $i))))
  ;; $timer asks for a timer on component "t" every ms milliseconds (at
  ;; most 16383; 0 cancels) and returns the status of the answer. The Timer
  ;; (ABI.md 4.3) is written at 0x280: the component name, then the interval
  ;; as a uvarint.
  (func $timer (param $ms i32) (result i32)
    (local $n i32)
    (i32.store8 (i32.const 0x280) (i32.const 1))
    (i32.store8 (i32.const 0x281) (i32.const 0x74)) ;; "t"
    (if (i32.lt_u (local.get $ms) (i32.const 0x80))
      (then
        (i32.store8 (i32.const 0x282) (local.get $ms))
        (local.set $n (i32.const 3)))
      (else
        (i32.store8 (i32.const 0x282) (i32.or (local.get $ms) (i32.const 0x80)))
        (i32.store8 (i32.const 0x283) (i32.shr_u (local.get $ms) (i32.const 7)))
        (local.set $n (i32.const 4))))
    (i32.wrap_i64 (i64.shr_u
      (call $host_timer (i32.const 0x280) (local.get $n) (i32.const 0) (i32.const 0))
      (i64.const 32))))
  ;; $payload returns the length of the payload of the n-byte request, or 0
  ;; when it has metadata (the host sends none with _settings).
  (func $payload (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (i32.const 0x10000))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (if (result i32) (i32.load8_u (local.get $p))
      (then (i32.const 0))
      (else (i32.sub (local.get $n) (i32.sub (i32.add (local.get $p) (i32.const 1)) (i32.const 0x10000))))))
  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (if (i32.eq (call $port (i32.const 0)) (i32.const 0x5f)) ;; '_'
      (then
        (if (i32.eq (call $port (i32.const 1)) (i32.const 0x74)) ;; "_t"
          (then (call $log (i32.const 2) (i32.const 0x210) (i32.const 4))))
        (if (i32.and (i32.eq (call $port (i32.const 1)) (i32.const 0x73)) ;; "_s"
                     (i32.gt_u (call $payload (local.get $n)) (i32.const 2)))
          (then
            (drop (call $timer (i32.const 10)))
            (unreachable)))))
    (i64.const 0x200_00000003)))
