;; stdio writes to stdout and stderr through WASI fd_write, and logs through
;; the log import, by the first letter of the port:
;;   out    1 MiB of "a" to stdout, without a newline
;;   err    1 MiB of "a" to stderr, without a newline
;;   lines  1000 lines "a line" to stdout, one write each
;;   glog   1000 lines "a line" through the log import, at info
;; Each answers ok with 4 bytes, the errno of the last fd_write (little
;; endian; 0 for glog); _settings does nothing.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "tinyhost_v1" "log" (func $log (param i32 i32 i32)))
  ;; 0..4095: descriptor, the line, the response and the iovec;
  ;; 4096..65535: the request buffer; 65536..: the 1 MiB of output.
  (memory (export "memory") 18)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"stdio\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"w\",\"ports\":[{\"name\":\"out\",\"direction\":\"input\"},{\"name\":\"err\",\"direction\":\"input\"},{\"name\":\"lines\",\"direction\":\"input\"},{\"name\":\"glog\",\"direction\":\"input\"}]}]}")
  (data (i32.const 1024) "a line\n")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x00000100000000DF)) ;; descriptor at 256, 223 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  ;; port returns the first byte of the request's port (ABI.md 4.1; every
  ;; length is under 128, so each is one byte).
  (func $port (result i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 3072) (local.get $ptr))
    (i32.store (i32.const 3076) (local.get $len))
    (i32.store (i32.const 2049) (call $fd_write (local.get $fd) (i32.const 3072) (i32.const 1) (i32.const 3080))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (local $c i32) (local $i i32)
    (local.set $c (call $port))
    (i32.store (i32.const 2049) (i32.const 0))
    (if (i32.eq (local.get $c) (i32.const 111)) ;; o
      (then
        (memory.fill (i32.const 65536) (i32.const 97) (i32.const 1048576))
        (call $write (i32.const 1) (i32.const 65536) (i32.const 1048576))))
    (if (i32.eq (local.get $c) (i32.const 101)) ;; e
      (then
        (memory.fill (i32.const 65536) (i32.const 97) (i32.const 1048576))
        (call $write (i32.const 2) (i32.const 65536) (i32.const 1048576))))
    (if (i32.eq (local.get $c) (i32.const 108)) ;; l
      (then (loop $next
        (call $write (i32.const 1) (i32.const 1024) (i32.const 7))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $next (i32.lt_u (local.get $i) (i32.const 1000))))))
    (if (i32.eq (local.get $c) (i32.const 103)) ;; g
      (then (loop $next
        (call $log (i32.const 2) (i32.const 1024) (i32.const 6))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $next (i32.lt_u (local.get $i) (i32.const 1000))))))
    (i32.store8 (i32.const 2048) (i32.const 0))
    (i64.const 0x0000080000000005))) ;; status ok at 2048, then the errno
