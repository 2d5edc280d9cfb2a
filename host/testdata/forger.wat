;; forger tries to write lines of its own into the host's log. Its text
;; (at 1024, 79 bytes) ends one line, forges a complete host line of
;; another level and module, and follows it with ESC, CR, an erase-line
;; escape, NUL and bytes that are not UTF-8:
;;
;;   "ok\n2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged: module=other\x1b[2K\r\x00\xff\xfe end\n"
;;
;; Its start function and _initialize log it (log import) and write it to
;; stdout. Component t, by the first letter of the port:
;;   log   logs it through the log import, at info
;;   out   writes it to stdout and to stderr
;;   arm   sets a 10 ms timer on t
;;   other answers ok
;; and every _tick fails (status error) with a reason of 4 MiB less one
;; byte: the text, then "x"s, so that the response is exactly the default
;; MaxMessageSize.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "tinyhost_v1" "log" (func $log (param i32 i32 i32)))
  (import "tinyhost_v1" "timer" (func $timer (param i32 i32 i32 i32) (result i64)))
  ;; 0..4095: descriptor, text, response, iovec; 4096..65535: the request
  ;; buffer; 65536..: the 4 MiB reason of a failed tick.
  (memory (export "memory") 66)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"forger\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"t\",\"ports\":[{\"name\":\"log\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"input\"},{\"name\":\"arm\",\"direction\":\"input\"}]}]}")
  (data (i32.const 1024) "ok\n2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged: module=other\1b[2K\0d\00\ff\fe end\n")
  ;; a Timer request: component "t", 10 ms
  (data (i32.const 1536) "\01t\0a")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x00000100000000BA)) ;; descriptor at 256, 186 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  (func $write (param $fd i32)
    (i32.store (i32.const 3072) (i32.const 1024))
    (i32.store (i32.const 3076) (i32.const 79))
    (drop (call $fd_write (local.get $fd) (i32.const 3072) (i32.const 1) (i32.const 3080))))
  (func $forge
    (call $log (i32.const 2) (i32.const 1024) (i32.const 79))
    (call $write (i32.const 1)))
  (func $start (call $forge))
  (start $start)
  (func (export "_initialize") (call $forge))
  ;; port returns the first byte of the request's port (ABI.md 4.1; every
  ;; length is under 128, so each is one byte), '_' for a system port.
  (func $port (result i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
  ;; tick: "_tick" is the only system port whose second letter is 't'.
  (func $tick (result i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (i32.eq (i32.load8_u (i32.add (local.get $p) (i32.const 2))) (i32.const 116)))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (local $c i32)
    (local.set $c (call $port))
    (if (i32.and (i32.eq (local.get $c) (i32.const 95)) (call $tick)) ;; _tick
      (then
        (i32.store8 (i32.const 65536) (i32.const 1)) ;; status error
        (memory.copy (i32.const 65537) (i32.const 1024) (i32.const 79))
        (memory.fill (i32.const 65616) (i32.const 120) (i32.const 4194224))
        (return (i64.const 0x0001000000400000)))) ;; at 65536, 4 MiB
    (if (i32.eq (local.get $c) (i32.const 108)) ;; l
      (then (call $log (i32.const 2) (i32.const 1024) (i32.const 79))))
    (if (i32.eq (local.get $c) (i32.const 111)) ;; o
      (then (call $write (i32.const 1)) (call $write (i32.const 2))))
    (if (i32.eq (local.get $c) (i32.const 97)) ;; a
      (then (drop (call $timer (i32.const 1536) (i32.const 3) (i32.const 2048) (i32.const 64)))))
    (i32.store8 (i32.const 2047) (i32.const 0))
    (i64.const 0x000007FF00000001))) ;; status ok at 2047
