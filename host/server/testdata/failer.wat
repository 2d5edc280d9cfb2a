;; failer fails every call with a reason that tries to write lines of its
;; own into the host's log: it ends one line, forges a complete host line,
;; and follows it with ESC, CR, an erase-line escape, NUL and bytes that
;; are not UTF-8 (the forger's text, host/testdata/forger.wat).
(module
  (memory (export "memory") 1)
  (data (i32.const 256) "{\22abi\22:1,\22name\22:\22failer\22,\22version\22:\221.0.0\22,\22components\22:[{\22name\22:\22c\22,\22ports\22:[{\22name\22:\22in\22,\22direction\22:\22input\22}]}]}")
  ;; status error, then the reason (79 bytes)
  (data (i32.const 1024) "\01ok\n2026-01-01T00:00:00.000Z [ERROR] tinyhost: forged: module=other\1b[2K\0d\00\ff\fe end\n")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x0000010000000073)) ;; descriptor at 256, 115 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (i64.const 0x0000040000000050))) ;; status error and reason at 1024, 80 bytes
