;; memgrow: an abitest hostile guest. Module "memgrow", component "m". Port
;; grow asks for 65,000 more pages of memory at once, then for 16 pages at a
;; time until memory.grow fails, and answers the memory size in pages
;; (4 bytes, little-endian): it must be within the module's limit. Port ok
;; answers "ok".
;; `make fixtures` builds memgrow.wasm from this file.
(module
  (memory (export "memory") 2)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"memgrow\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"m\",\"info\":{\"description\":\"Grows its memory until refused on grow.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"grow\",\"direction\":\"input\"},{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 236)))
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
  ;; $reply answers ok with v as 4 bytes, little-endian: the response at
  ;; 0x300, 5 bytes.
  (func $reply (param $v i32) (result i64)
    (i32.store8 (i32.const 0x300) (i32.const 0))
    (i32.store (i32.const 0x301) (local.get $v))
    (i64.const 0x300_00000005))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (if (i32.eq (call $port (i32.const 0)) (i32.const 0x67)) ;; 'g'
      (then
        (drop (memory.grow (i32.const 65000)))
        (loop $more
          (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
        (return (call $reply (memory.size)))))
    (i64.const 0x200_00000003)))
