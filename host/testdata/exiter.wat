;; exiter calls WASI proc_exit(3) on port "exit", which closes its instance
;; (and unmaps its memory) while the call is still on the stack; on port
;; "ok" it answers ok.
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  ;; 0..4095: descriptor, response; 4096..: request buffer.
  (memory (export "memory") 1)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"exiter\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"e\",\"ports\":[{\"name\":\"exit\",\"direction\":\"input\"},{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x0000010000000097)) ;; descriptor at 256, 151 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  ;; port returns the first byte of the request's port (ABI.md 4.1).
  (func $port (result i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (if (i32.eq (call $port) (i32.const 101)) ;; e
      (then (call $exit (i32.const 3))))
    (i32.store8 (i32.const 2048) (i32.const 0))
    (i64.const 0x0000080000000001)))
