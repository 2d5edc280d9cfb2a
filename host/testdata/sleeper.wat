;; sleeper is a slow target: on port in it sleeps for 1 s in WASI
;; poll_oneoff, then answers ok; on "_" ports it answers at once.
(module
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  ;; 0..4095: descriptor, subscription, event, response; 4096..: request buffer.
  (memory (export "memory") 1)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"sleeper\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"s\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x0000010000000074)) ;; descriptor at 256, 116 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  ;; port returns the first byte of the request's port (ABI.md 4.1).
  (func $port (result i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (if (i32.eq (call $port) (i32.const 105)) ;; i
      (then
        ;; One relative clock subscription (48 bytes at 1024): tag 0
        ;; (clock) at +8, clock id 1 (monotonic) at +16, timeout in ns at
        ;; +24; the rest zero.
        (i32.store8 (i32.const 1032) (i32.const 0))
        (i32.store (i32.const 1040) (i32.const 1))
        (i64.store (i32.const 1048) (i64.const 1000000000))
        (drop (call $poll (i32.const 1024) (i32.const 1100) (i32.const 1) (i32.const 1140)))))
    (i32.store8 (i32.const 2048) (i32.const 0))
    (i64.const 0x0000080000000001)))
