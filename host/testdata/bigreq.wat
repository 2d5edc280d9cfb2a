;; bigreq calls a host function with a request of its whole memory, 16
;; MiB: what the host allocates for such a request must not grow with it.
;; The port says which import: s secret, t timer, k kv, h http, e emit,
;; n send, a call, l log. The handler answers ok with one byte, the status
;; of the host's answer (0 for log). Built with /usr/bin/wat2wasm (wabt
;; 1.0.32).
(module
  (import "tinyhost_v1" "secret" (func $secret (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "timer" (func $timer (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "kv" (func $kv (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "http" (func $http (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "emit" (func $emit (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "send" (func $send (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "call" (func $call (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "log" (func $log (param i32 i32 i32)))
  ;; 256..: descriptor; 4096..8189: request buffer; 8190: the response.
  (memory (export "memory") 256)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"bigreq\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"s\",\"direction\":\"input\"},{\"name\":\"t\",\"direction\":\"input\"},{\"name\":\"k\",\"direction\":\"input\"},{\"name\":\"h\",\"direction\":\"input\"},{\"name\":\"e\",\"direction\":\"input\"},{\"name\":\"n\",\"direction\":\"input\"},{\"name\":\"a\",\"direction\":\"input\"},{\"name\":\"l\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x10000000159))
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 4094))))
  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (local $p i32) (local $mode i32) (local $size i32) (local $r i64)
    ;; Skip module and component; the port's first byte is the mode.
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (local.set $mode (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
    (local.set $size (i32.mul (memory.size) (i32.const 65536)))
    (if (i32.eq (local.get $mode) (i32.const 115)) ;; s
      (then (local.set $r (call $secret (i32.const 0) (local.get $size) (i32.const 0) (i32.const 0)))))
    (if (i32.eq (local.get $mode) (i32.const 116)) ;; t
      (then (local.set $r (call $timer (i32.const 0) (local.get $size) (i32.const 0) (i32.const 0)))))
    (if (i32.eq (local.get $mode) (i32.const 107)) ;; k
      (then (local.set $r (call $kv (i32.const 0) (local.get $size) (i32.const 0) (i32.const 0)))))
    (if (i32.eq (local.get $mode) (i32.const 104)) ;; h
      (then (local.set $r (call $http (i32.const 0) (local.get $size) (i32.const 0) (i32.const 0)))))
    (if (i32.eq (local.get $mode) (i32.const 101)) ;; e
      (then (local.set $r (call $emit (i32.const 0) (local.get $size) (i32.const 0) (i32.const 0)))))
    (if (i32.eq (local.get $mode) (i32.const 110)) ;; n
      (then (local.set $r (call $send (i32.const 0) (local.get $size) (i32.const 0) (i32.const 0)))))
    (if (i32.eq (local.get $mode) (i32.const 97)) ;; a
      (then (local.set $r (call $call (i32.const 0) (local.get $size) (i32.const 0) (i32.const 0)))))
    (if (i32.eq (local.get $mode) (i32.const 108)) ;; l
      (then (call $log (i32.const 2) (i32.const 0) (local.get $size))))
    (i32.store8 (i32.const 8190) (i32.const 0))
    (i32.store8 (i32.const 8191) (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))))
    (i64.const 0x00001ffe00000002)))
