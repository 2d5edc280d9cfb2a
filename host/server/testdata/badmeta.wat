;; badmeta emits, on every message to component e (port in), one message on
;; its output port out whose metadata value is the byte 0xff, not UTF-8,
;; and replies ok.
(module
  (import "tinyhost_v1" "emit" (func $emit (param i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 256) "{\22abi\22:1,\22name\22:\22badmeta\22,\22version\22:\221.0.0\22,\22components\22:[{\22name\22:\22e\22,\22ports\22:[{\22name\22:\22in\22,\22direction\22:\22input\22},{\22name\22:\22out\22,\22direction\22:\22output\22}]}]}")
  ;; the message: module "", component "e", port "out", metadata k=0xff,
  ;; payload "x"
  (data (i32.const 1536) "\00\01e\03out\01\01k\01\ffx")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x0000010000000098)) ;; descriptor at 256, 152 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    ;; _settings (a system port: its first byte after the port's length
    ;; is '_') is answered ok at once.
    (if (i32.ne (i32.load8_u (i32.add (i32.add (i32.const 4099) (i32.load8_u (i32.const 4096)))
          (i32.load8_u (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096)))))) (i32.const 95))
      (then (drop (call $emit (i32.const 1536) (i32.const 13) (i32.const 2100) (i32.const 64)))))
    (i32.store8 (i32.const 2048) (i32.const 0))
    (i64.const 0x0000080000000001))) ;; status ok at 2048
