;; kv: an abitest guest of the kv import (ABI.md 5.4). Module "kv",
;; component "k", port "do". The payload of a message on "do" is a
;; KVRequest encoding (ABI.md 4.6), handed to the kv import as it is; the
;; reply is one byte, the status of the host's answer, then its result
;; bytes. A payload whose first byte is 0xff makes the import read its
;; request outside memory instead. It skips metadata entries of at most 127
;; bytes of key and of value, as the suite sends. `make fixtures` builds
;; kv.wasm from this file.
(module
  (import "tinyhost_v1" "kv" (func $kv (param i32 i32 i32 i32) (result i64)))
  ;; 0x400 the descriptor; 0x10000 the request buffer (up to 1 MiB);
  ;; 0x1ffffe the reply: a status byte, the host's status, then the
  ;; result at 0x200000 (up to 14 MiB).
  (memory (export "memory") 256)
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"kv\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"k\",\"info\":{\"description\":\"Makes the kv request its payload encodes and answers the host status and result.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"do\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 236)))
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x10000) (i32.gt_u (local.get $size) (i32.const 0x100000))))
  (func (export "tinyhost_handle") (param $len i32) (result i64)
    (local $p i32)
    (local $n i32)
    (local $r i64)
    (local.set $p (i32.const 0x10000))
    ;; module, component and port: a one-byte length and the bytes each
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    ;; metadata: a one-byte count, then key and value, a one-byte length each
    (local.set $n (i32.load8_u (local.get $p)))
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (block $done
      (loop $entry
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
        (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $entry)))
    (if (i32.eq (i32.load8_u (local.get $p)) (i32.const 0xff))
      (then (local.set $p (i32.const 0xffff0000))))
    (local.set $r (call $kv
      (local.get $p)
      (i32.sub (i32.add (i32.const 0x10000) (local.get $len)) (local.get $p))
      (i32.const 0x200000) (i32.const 0xe00000)))
    (local.set $n (i32.wrap_i64 (local.get $r)))
    (if (i32.gt_u (local.get $n) (i32.const 0xe00000))
      (then (local.set $n (i32.const 0))))
    (i32.store8 (i32.const 0x1ffffe) (i32.const 0))
    (i32.store8 (i32.const 0x1fffff) (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))))
    (i64.or (i64.const 0x1ffffe_00000000) (i64.extend_i32_u (i32.add (local.get $n) (i32.const 2))))))
