;; timerfail: a module whose load fails after its _settings set a timer.
;; The first instance is the one the host describes; its _settings (any
;; message) sets a 10 ms timer on component t. Every other instance traps on
;; its first message, so a load with MinInstances 2 fails after the timer was
;; set. Built with: wat2wasm timerfail.wat
(module
  (import "tinyhost_v1" "timer" (func $timer (param i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  ;; the descriptor, 118 bytes
  (data (i32.const 0) "{\"abi\":1,\"name\":\"timerfail\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"t\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"}]}]}")
  ;; a Timer request: component "t", 10 ms
  (data (i32.const 512) "\01t\0a")
  ;; a Response: status ok, no body
  (data (i32.const 600) "\00")
  (global $described (mut i32) (i32.const 0))
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (global.set $described (i32.const 1))
    (i64.const 118)) ;; pointer 0, length 118
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.le_u (local.get $size) (i32.const 60000))
      (then (i32.const 1024))
      (else (i32.const 0))))
  (func (export "tinyhost_handle") (param $len i32) (result i64)
    (if (i32.eqz (global.get $described)) (then unreachable))
    (drop (call $timer (i32.const 512) (i32.const 3) (i32.const 700) (i32.const 64)))
    (i64.const 0x0000025800000001))) ;; pointer 600, length 1
