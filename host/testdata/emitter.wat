;; emitter emits, on every message to component e (port many), a
;; million messages of a 6-byte payload on its output port out, one emit
;; each, whatever the host answers, and replies with how many the host
;; took (4 bytes, little endian).
(module
  (import "tinyhost_v1" "emit" (func $emit (param i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 256) "{\22abi\22:1,\22name\22:\22emitter\22,\22version\22:\221.0.0\22,\22components\22:[{\22name\22:\22e\22,\22ports\22:[{\22name\22:\22many\22,\22direction\22:\22input\22},{\22name\22:\22out\22,\22direction\22:\22output\22}]}]}")
  ;; the message: module "", component "e", port "out", no metadata,
  ;; payload "tiny!\n"
  (data (i32.const 1536) "\00\01e\03out\00tiny!\0a")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x000001000000009A)) ;; descriptor at 256, 154 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (local $i i32) (local $ok i32)
    ;; _settings (a system port: its first byte after the port's length
    ;; is '_') is answered ok at once.
    (if (i32.ne (i32.load8_u (i32.add (i32.add (i32.const 4099) (i32.load8_u (i32.const 4096)))
          (i32.load8_u (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096)))))) (i32.const 95))
      (then (loop $next
        (if (i64.eqz (i64.shr_u
              (call $emit (i32.const 1536) (i32.const 14) (i32.const 2100) (i32.const 64))
              (i64.const 32)))
          (then (local.set $ok (i32.add (local.get $ok) (i32.const 1)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $next (i32.lt_u (local.get $i) (i32.const 1000000))))))
    (i32.store8 (i32.const 2048) (i32.const 0))
    (i32.store (i32.const 2049) (local.get $ok))
    (i64.const 0x0000080000000005))) ;; status ok and the count, at 2048
