;; calls: an ABI v1 guest by hand that makes every host call. Module "wat",
;; component "c": _initialize logs; every message (port "in" or any other)
;; logs, sends and calls "echo/echo/in", emits on "out", reads the
;; configuration, cancels its timer and fetches a pending result, then
;; replies ok.
(module
  (import "tinyhost_v1" "log" (func $log (param i32 i32 i32)))
  (import "tinyhost_v1" "emit" (func $emit (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "send" (func $send (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "call" (func $call (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "config" (func $config (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "timer" (func $timer (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "result" (func $result (param i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1 16)

  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")
  (data (i32.const 2048) "\00ok")
  (data (i32.const 2064) "hello from wat")
  ;; Messages: a send or call to echo/echo/in, an emit on c/out, a timer.
  (data (i32.const 2096) "\04echo\04echo\02in\00hi")
  (data (i32.const 2128) "\00\01c\03out\00hi")
  (data (i32.const 2144) "\01c\00")

  (func (export "tinyhost_abi_v1"))

  (func (export "_initialize")
    (call $log (i32.const 2) (i32.const 2064) (i32.const 14)))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 32768))
      (then (i32.const 0))
      (else (i32.const 8192))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (call $log (i32.const 1) (i32.const 2064) (i32.const 14))
    ;; Results go to 40960, 64 bytes; the call's reply does not fit in 1
    ;; byte, so it is fetched with result.
    (drop (call $send (i32.const 2096) (i32.const 16) (i32.const 40960) (i32.const 64)))
    (drop (call $call (i32.const 2096) (i32.const 16) (i32.const 40960) (i32.const 1)))
    (drop (call $result (i32.const 0) (i32.const 0) (i32.const 40960) (i32.const 64)))
    (drop (call $emit (i32.const 2128) (i32.const 10) (i32.const 40960) (i32.const 64)))
    (drop (call $config (i32.const 0) (i32.const 0) (i32.const 40960) (i32.const 64)))
    (drop (call $timer (i32.const 2144) (i32.const 3) (i32.const 40960) (i32.const 64)))
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 3)))
)
