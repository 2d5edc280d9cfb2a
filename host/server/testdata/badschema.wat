;; badschema describes itself with a port schema that is valid JSON but
;; not valid UTF-8 (the title is the byte 0xff); otherwise it answers ok.
(module
  (memory (export "memory") 1)
  (data (i32.const 256) "{\22abi\22:1,\22name\22:\22badschema\22,\22version\22:\221.0.0\22,\22components\22:[{\22name\22:\22c\22,\22ports\22:[{\22name\22:\22in\22,\22direction\22:\22input\22,\22schema\22:{\22title\22:\22\ff\22}}]}]}")
  (data (i32.const 2048) "\00")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x000001000000008D)) ;; descriptor at 256, 141 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (i64.const 0x0000080000000001))) ;; status ok at 2048
