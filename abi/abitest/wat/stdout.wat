;; stdout: an abitest hostile guest. Module "stdout", component "w". Port out
;; writes 1 MiB of "x" without a newline to stdout in one fd_write, port err
;; the same to stderr; both answer "ok". A host logs a guest's output only
;; when the module has the log capability, in lines of at most 16 KiB.
;; Port ok answers "ok".
;; `make fixtures` builds stdout.wasm from this file.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  ;; Pages 2 to 17 hold the megabyte written.
  (memory (export "memory") 18)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"stdout\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"w\",\"info\":{\"description\":\"Writes 1 MiB without a newline to stdout on out, to stderr on err.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"out\",\"direction\":\"input\"},{\"name\":\"err\",\"direction\":\"input\"},{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 296)))
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
  ;; $flood writes 1 MiB of "x" to fd, with one iovec at 0x100.
  (func $flood (param $fd i32)
    (memory.fill (i32.const 0x20000) (i32.const 0x78) (i32.const 0x100000))
    (i32.store (i32.const 0x100) (i32.const 0x20000))
    (i32.store (i32.const 0x104) (i32.const 0x100000))
    (drop (call $fd_write (local.get $fd) (i32.const 0x100) (i32.const 1) (i32.const 0x108))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (local $c i32)
    (local.set $c (call $port (i32.const 0)))
    (if (i32.eq (local.get $c) (i32.const 0x6f)) ;; 'o'
      (then (if (i32.eq (call $port (i32.const 1)) (i32.const 0x75)) ;; 'u': out, not ok
        (then (call $flood (i32.const 1))))))
    (if (i32.eq (local.get $c) (i32.const 0x65)) ;; 'e'
      (then (call $flood (i32.const 2))))
    (i64.const 0x200_00000003)))
