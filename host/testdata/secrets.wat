;; secrets: module "secrets", component "s", port "get". The payload of a
;; message on get is a secret's name, handed to the secret import as it is;
;; the reply is one byte, the status of the host's answer, then its result
;; bytes (the value, or a reason). Messages carry no metadata here.
;; `make fixtures` builds secrets.wasm from this file.
(module
  (import "tinyhost_v1" "secret" (func $secret (param i32 i32 i32 i32) (result i64)))
  ;; 0x400 the descriptor; 0x10000 the request buffer (up to 64 KiB);
  ;; 0x1fffe the reply: a status byte, the host's status, then the result
  ;; at 0x20000 (up to 128 KiB).
  (memory (export "memory") 4)
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"secrets\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"s\",\"info\":{\"description\":\"Reads the secret its payload names and answers the status and result.\",\"tags\":[\"test\"]},\"ports\":[{\"name\":\"get\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 228)))
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x10000) (i32.gt_u (local.get $size) (i32.const 0x10000))))
  (func (export "tinyhost_handle") (param $len i32) (result i64)
    (local $p i32)
    (local $n i32)
    (local $r i64)
    (local.set $p (i32.const 0x10000))
    ;; module, component and port: a one-byte length and the bytes each;
    ;; then a metadata count of 0
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (local.set $r (call $secret
      (local.get $p)
      (i32.sub (i32.add (i32.const 0x10000) (local.get $len)) (local.get $p))
      (i32.const 0x20000) (i32.const 0x20000)))
    (local.set $n (i32.wrap_i64 (local.get $r)))
    (if (i32.gt_u (local.get $n) (i32.const 0x20000))
      (then (local.set $n (i32.const 0))))
    (i32.store8 (i32.const 0x1fffe) (i32.const 0))
    (i32.store8 (i32.const 0x1ffff) (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))))
    (i64.or (i64.const 0x1fffe_00000000) (i64.extend_i32_u (i32.add (local.get $n) (i32.const 2))))))
