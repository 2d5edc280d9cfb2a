;; timers: an abitest hostile guest. Module "timers", component "t". Port fast
;; asks for a timer every millisecond; port many asks 10,000 times, for
;; intervals of 1000 to 10999 ms; port stop cancels the timer. fast and stop
;; answer the status of the host's answer, many how many were ok (4 bytes,
;; little-endian). On _tick it logs "tick" at info. Port ok answers "ok".
;; `make fixtures` builds timers.wasm from this file.
(module
  (import "tinyhost_v1" "timer" (func $host_timer (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x210) "tick")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"timers\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"t\",\"info\":{\"description\":\"Sets a 1 ms timer on fast, 10,000 timers on many; stop cancels.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"fast\",\"direction\":\"input\"},{\"name\":\"many\",\"direction\":\"input\"},{\"name\":\"stop\",\"direction\":\"input\"},{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 331)))
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
  ;; $reply answers ok with v as 4 bytes, little-endian: the response at
  ;; 0x300, 5 bytes.
  (func $reply (param $v i32) (result i64)
    (i32.store8 (i32.const 0x300) (i32.const 0))
    (i32.store (i32.const 0x301) (local.get $v))
    (i64.const 0x300_00000005))
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
  (func (export "tinyhost_handle") (param i32) (result i64)
    (local $c i32)
    (local $i i32)
    (local $ok i32)
    (local.set $c (call $port (i32.const 0)))
    (if (i32.eq (local.get $c) (i32.const 0x66)) ;; 'f'
      (then (return (call $reply (call $timer (i32.const 1))))))
    (if (i32.eq (local.get $c) (i32.const 0x6d)) ;; 'm'
      (then
        (loop $more
          (if (i32.eqz (call $timer (i32.add (i32.const 1000) (local.get $i))))
            (then (local.set $ok (i32.add (local.get $ok) (i32.const 1)))))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $more (i32.lt_u (local.get $i) (i32.const 10000))))
        (return (call $reply (local.get $ok)))))
    (if (i32.eq (local.get $c) (i32.const 0x73)) ;; 's'
      (then (return (call $reply (call $timer (i32.const 0))))))
    (if (i32.and (i32.eq (local.get $c) (i32.const 0x5f)) (i32.eq (call $port (i32.const 1)) (i32.const 0x74))) ;; "_t"
      (then (call $log (i32.const 2) (i32.const 0x210) (i32.const 4))))
    (i64.const 0x200_00000003)))
