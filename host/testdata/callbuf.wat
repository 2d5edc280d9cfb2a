;; callbuf exercises tinyhost_result_buffer for the reply of a call to a
;; module loaded in the same host, which the host runs once the callee's
;; instance is back in its pool.
;; Loaded twice, as "callbuf" (the caller) and "callee": port e answers
;; the 40 bytes at 300; every other port calls callee/c/e with
;; out_cap 0, so that the reply never fits, and answers ok with the reply
;; it then finds at 8192. The port says what tinyhost_result_buffer does,
;; as in resultbuf: g hands out 8192; z returns 0 (the reply is pending,
;; fetched with result); o hands out a region outside memory; r makes a
;; host call (config) from within the export; x calls WASI proc_exit from
;; within it; s logs "spin" and spins until its call is stopped. Once
;; call returns, the handler logs "after " and the port's first byte.
;; Built with /usr/bin/wat2wasm.
(module
  (import "tinyhost_v1" "call" (func $call (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "config" (func $config (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "result" (func $result (param i32 i32 i32 i32) (result i64)))
  (import "tinyhost_v1" "log" (func $log (param i32 i32 i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  ;; 0..4095: data; 4096..8190: request buffer; 8191: the response's
  ;; status, then the result.
  (memory (export "memory") 1)
  (global $mode (mut i32) (i32.const 0))
  (data (i32.const 100) "\06callee\01c\01e\00hello")
  (data (i32.const 200) "after ")
  (data (i32.const 210) "spin")
  (data (i32.const 300) "a reply written from the callee's memory")
  (data (i32.const 1024) "{\22abi\22:1,\22name\22:\22callbuf\22,\22version\22:\221.0.0\22,\22components\22:[{\22name\22:\22c\22,\22ports\22:[{\22name\22:\22g\22,\22direction\22:\22input\22},{\22name\22:\22z\22,\22direction\22:\22input\22},{\22name\22:\22o\22,\22direction\22:\22input\22},{\22name\22:\22r\22,\22direction\22:\22input\22},{\22name\22:\22x\22,\22direction\22:\22input\22},{\22name\22:\22e\22,\22direction\22:\22input\22},{\22name\22:\22s\22,\22direction\22:\22input\22}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x40000000139)) ;; descriptor at 1024, 313 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 4095))))
  (func (export "tinyhost_result_buffer") (param $size i32) (result i32)
    (if (i32.eq (global.get $mode) (i32.const 122)) ;; z
      (then (return (i32.const 0))))
    (if (i32.eq (global.get $mode) (i32.const 111)) ;; o
      (then (return (i32.const 0x7ffffff0))))
    (if (i32.eq (global.get $mode) (i32.const 114)) ;; r
      (then (drop (call $config (i32.const 0) (i32.const 0) (i32.const 8192) (i32.const 64)))))
    (if (i32.eq (global.get $mode) (i32.const 120)) ;; x
      (then (call $exit (i32.const 4))))
    (if (i32.eq (global.get $mode) (i32.const 115)) ;; s
      (then (call $log (i32.const 2) (i32.const 210) (i32.const 4))
            (loop $spin (br $spin))))
    (i32.const 8192))
  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (local $p i32) (local $r i64) (local $len i32)
    ;; Skip module and component; the port's first byte is the mode.
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (global.set $mode (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
    (i32.store8 (i32.const 8191) (i32.const 0))
    (if (i32.eq (global.get $mode) (i32.const 101)) ;; e: the callee's reply
      (then (memory.copy (i32.const 8192) (i32.const 300) (i32.const 40))
            (return (i64.const 0x1fff00000029))))
    (local.set $r (call $call (i32.const 100) (i32.const 17) (i32.const 8192) (i32.const 0)))
    (local.set $len (i32.wrap_i64 (local.get $r)))
    (i32.store8 (i32.const 206) (global.get $mode))
    (call $log (i32.const 2) (i32.const 200) (i32.const 7))
    (if (i32.eq (global.get $mode) (i32.const 120)) ;; x: memory and a host call after the exit
      (then (i32.store8 (i32.const 8191) (i32.load8_u (i32.const 8192)))
            (drop (call $config (i32.const 0) (i32.const 0) (i32.const 8192) (i32.const 64)))))
    (if (i32.eq (global.get $mode) (i32.const 122)) ;; z: fetch the pending result
      (then (drop (call $result (i32.const 0) (i32.const 0) (i32.const 8192) (i32.const 64)))))
    (i64.or (i64.const 0x00001fff00000000) (i64.extend_i32_u (i32.add (local.get $len) (i32.const 1))))))
