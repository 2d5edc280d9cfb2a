;; fill: an ABI v1 guest by hand whose start function grows its memory to
;; 512 pages (32 MiB) and fills it with non-zero bytes, which computes and
;; reads nothing an instance must not share, but leaves a memory whose
;; snapshot would be a module of 32 MiB. Every message gets an empty ok.
;; Built with /usr/bin/wat2wasm.
(module
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")

  (func $fill
    (drop (memory.grow (i32.const 511)))
    ;; 4096 on: the descriptor and the response stay as they are.
    (memory.fill (i32.const 4096) (i32.const 0xAA) (i32.const 0x1fff000)))
  (start $fill)

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 32768))
      (then (i32.const 0))
      (else (i32.const 4096))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 1)))
)
