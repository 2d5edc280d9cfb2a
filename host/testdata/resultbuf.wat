;; resultbuf exercises tinyhost_result_buffer, the region a guest hands
;; out for a host call's result longer than out_cap. Its component c calls
;; config with out_cap 0, so that the result ("{}" without configuration)
;; never fits, and answers ok with the result it then finds at 8192. The
;; port says what the export does: g hands out 8192; z returns 0 (the
;; result is pending, fetched with result); o hands out a region outside
;; memory; r makes a host call (config) from within the export; s calls
;; result from within it, with no room for its answer (which must not
;; call the export again); x calls WASI proc_exit from within it, which
;; closes the instance and unmaps its memory, then the handler, were it
;; to go on, reads memory and makes another host call; u traps
;; (unreachable); m grows memory by 64 pages, then hands out 8192; d
;; recurses until its stack overflows; w hands out 0xffffffff, whose
;; region wraps past 2^32. Once config
;; returns, the handler logs "after " and the port's first byte. Built
;; with /usr/bin/wat2wasm.
(module
  (import "tinyhost_v1" "config" (func $config (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "result" (func $result (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "log" (func $log (param i32 i32 i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  ;; 0..4095: descriptor; 4096..8190: request buffer; 8191: the response's
  ;; status, then the result.
  (memory (export "memory") 1)
  (global $mode (mut i32) (i32.const 0))
  (data (i32.const 200) "after ")
  (data (i32.const 256) "{\"abi\":1,\"name\":\"resultbuf\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"g\",\"direction\":\"input\"},{\"name\":\"z\",\"direction\":\"input\"},{\"name\":\"o\",\"direction\":\"input\"},{\"name\":\"r\",\"direction\":\"input\"},{\"name\":\"s\",\"direction\":\"input\"},{\"name\":\"x\",\"direction\":\"input\"},{\"name\":\"u\",\"direction\":\"input\"},{\"name\":\"m\",\"direction\":\"input\"},{\"name\":\"d\",\"direction\":\"input\"},{\"name\":\"w\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x1000000019e)) ;; descriptor at 256, 414 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 4095))))
  (func (export "tinyhost_result_buffer") (param $size i32) (result i32)
    (if (i32.eq (global.get $mode) (i32.const 122)) ;; z
      (then (return (i32.const 0))))
    (if (i32.eq (global.get $mode) (i32.const 111)) ;; o
      (then (return (i32.const 0x7ffffff0))))
    (if (i32.eq (global.get $mode) (i32.const 114)) ;; r
      (then (drop (call $config (i32.const 0) (i32.const 0) (i32.const 8192) (i32.const 64)))))
    (if (i32.eq (global.get $mode) (i32.const 115)) ;; s
      (then (drop (call $result (i32.const 0) (i32.const 0) (i32.const 8192) (i32.const 0)))))
    (if (i32.eq (global.get $mode) (i32.const 120)) ;; x
      (then (call $exit (i32.const 4))))
    (if (i32.eq (global.get $mode) (i32.const 117)) ;; u
      (then unreachable))
    (if (i32.eq (global.get $mode) (i32.const 109)) ;; m
      (then (drop (memory.grow (i32.const 64)))))
    (if (i32.eq (global.get $mode) (i32.const 100)) ;; d
      (then (return (call $deep (local.get $size)))))
    (if (i32.eq (global.get $mode) (i32.const 119)) ;; w
      (then (return (i32.const -1))))
    (i32.const 8192))
  ;; deep recurses until the stack overflows.
  (func $deep (param $n i32) (result i32)
    (i32.add (call $deep (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))
  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (local $p i32) (local $r i64) (local $len i32)
    ;; Skip module and component; the port's first byte is the mode.
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (global.set $mode (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
    (i32.store8 (i32.const 8191) (i32.const 0))
    (local.set $r (call $config (i32.const 0) (i32.const 0) (i32.const 8192) (i32.const 0)))
    (local.set $len (i32.wrap_i64 (local.get $r)))
    ;; "after <port's first byte>", logged once the host call returns:
    ;; never after a failed export.
    (i32.store8 (i32.const 206) (global.get $mode))
    (call $log (i32.const 2) (i32.const 200) (i32.const 7))
    (if (i32.eq (global.get $mode) (i32.const 120)) ;; x: memory and a host call after the exit
      (then (i32.store8 (i32.const 8191) (i32.load8_u (i32.const 8192)))
            (drop (call $config (i32.const 0) (i32.const 0) (i32.const 8192) (i32.const 64)))))
    (if (i32.eq (global.get $mode) (i32.const 122)) ;; z: fetch the pending result
      (then (drop (call $result (i32.const 0) (i32.const 0) (i32.const 8192) (i32.const 64)))))
    (i64.or (i64.const 0x00001fff00000000) (i64.extend_i32_u (i32.add (local.get $len) (i32.const 1))))))
