;; settingsrecurse: an abitest hostile guest. Module "settingsrecurse",
;; component "r", port "ok". On _settings, which every new instance gets
;; while the module loads, it calls $rec 60, which calls itself twice per
;; level: 2^61 calls and not one loop.
;; `make fixtures` builds settingsrecurse.wasm from this file.
(module
  (memory (export "memory") 2)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"settingsrecurse\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"r\",\"info\":{\"description\":\"Recurses without loops on _settings.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 205)))
  ;; The request buffer is the second page.
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 0) (i32.const 0x10000) (i32.gt_u (local.get $size) (i32.const 0x10000))))
  ;; $port returns byte $i of the request's port name. A request starts
  ;; with the module, component and port names, each a one-byte length and
  ;; its bytes (ABI.md 4.1: names are at most 63 bytes).
  (func $port (param $i i32) (result i32)
    (local $p i32)
    (local.set $p (i32.const 0x10000))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (i32.load8_u (i32.add (i32.add (local.get $p) (i32.const 1)) (local.get $i))))
  (func $rec (param $n i32)
    (if (local.get $n)
      (then
        (call $rec (i32.sub (local.get $n) (i32.const 1)))
        (call $rec (i32.sub (local.get $n) (i32.const 1))))))
  ;; The system ports recurse; "ok" answers ok, "ok".
  (func (export "tinyhost_handle") (param i32) (result i64)
    (if (i32.eq (call $port (i32.const 0)) (i32.const 0x5f)) ;; '_'
      (then (call $rec (i32.const 60))))
    (i64.const 0x200_00000003)))
