;; bigmem declares an initial memory of 5000 pages (312 MiB), above the
;; host's default limit of 4096: loading it must fail with an error, not
;; crash the host when wazero allocates the memory.
(module
  (memory (export "memory") 5000)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"bigmem\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x0000010000000073)) ;; descriptor at 256, 115 bytes
  (func (export "tinyhost_buffer") (param i32) (result i32)
    (i32.const 4096))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (i32.store8 (i32.const 2048) (i32.const 0))
    (i64.const 0x0000080000000001))) ;; status ok at 2048, 1 byte
