;; wat2wasm: --enable-threads
;; sharedmem declares a shared memory (the threads proposal), which the
;; host's runtime does not enable: it must be refused at load, since a
;; shared memory cannot be backed by an allocator whose buffer moves.
(module
  (memory (export "memory") 1 1 shared)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"sharedmem\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x0000010000000076)) ;; descriptor at 256, 118 bytes
  (func (export "tinyhost_buffer") (param i32) (result i32)
    (i32.const 4096))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (i32.store8 (i32.const 2048) (i32.const 0))
    (i64.const 0x0000080000000001)))
