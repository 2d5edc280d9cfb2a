;; tables: a hand-written ABI v1 guest for the host's table bound. Module
;; "tables", component "t", port grow: grows table 0 (a funcref table of 1
;; element, no maximum) by the little-endian i32 in the payload and replies
;; with the 4 bytes of what table.grow returned (-1: refused). Other ports
;; answer an empty ok. Names are at most 63 bytes, so each of the message's
;; strings has a one-byte length; messages with metadata are refused.
(module
  (memory (export "memory") 1)
  (table 1 funcref)
  ;; 0..1023: the descriptor; 1024: the response; 4096..65535: the request.
  (data (i32.const 0) "{\"abi\":1,\"name\":\"tables\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"t\",\"ports\":[{\"name\":\"grow\",\"direction\":\"input\"}]}]}")
  (global $descriptorLen i32 (i32.const 117))

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.extend_i32_u (global.get $descriptorLen)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 61440))
      (then (i32.const 0))
      (else (i32.const 4096))))

  ;; reply returns the response at 1024: a status byte and n bytes of body.
  (func $reply (param $status i32) (param $n i32) (result i64)
    (i32.store8 (i32.const 1024) (local.get $status))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32))
            (i64.extend_i32_u (i32.add (local.get $n) (i32.const 1)))))

  (func (export "tinyhost_handle") (param $len i32) (result i64)
    (local $p i32) (local $port i32)
    ;; skip module and component
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (local.set $port (i32.add (local.get $p) (i32.const 1)))
    (local.set $p (i32.add (local.get $port) (i32.load8_u (local.get $p))))
    (if (i32.load8_u (local.get $p))
      (then (return (call $reply (i32.const 1) (i32.const 0)))))
    ;; "grow"
    (if (i32.eq (i32.load8_u (local.get $port)) (i32.const 103))
      (then
        (i32.store (i32.const 1025)
          (table.grow 0 (ref.null func) (i32.load (i32.add (local.get $p) (i32.const 1)))))
        (return (call $reply (i32.const 0) (i32.const 4)))))
    (call $reply (i32.const 0) (i32.const 0))))
