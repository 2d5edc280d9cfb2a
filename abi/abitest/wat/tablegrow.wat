;; tablegrow: an abitest hostile guest. Module "tablegrow", component "t".
;; Port grow grows its funcref table by 200,000,000 slots at once; port creep
;; grows it by 1,000,000 slots at a time until table.grow fails or the table
;; has 50,000,000 slots. Both answer the table size (4 bytes,
;; little-endian), which a host that counts tables against the module's
;; memory limit keeps within it. Port ok answers "ok".
;; `make fixtures` builds tablegrow.wasm from this file.
(module
  (memory (export "memory") 2)
  (table $t 1 funcref)
  (data (i32.const 0x200) "\00ok")
  (data (i32.const 0x400) "{\"abi\":1,\"name\":\"tablegrow\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"t\",\"info\":{\"description\":\"Grows its table on grow and creep.\",\"tags\":[\"abitest\"]},\"ports\":[{\"name\":\"grow\",\"direction\":\"input\"},{\"name\":\"creep\",\"direction\":\"input\"},{\"name\":\"ok\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 0x400) (i64.const 32)) (i64.const 270)))
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
    (local $c i32)
    (local.set $c (call $port (i32.const 0)))
    (if (i32.eq (local.get $c) (i32.const 0x67)) ;; 'g'
      (then
        (drop (table.grow $t (ref.null func) (i32.const 200000000)))
        (return (call $reply (table.size $t)))))
    (if (i32.eq (local.get $c) (i32.const 0x63)) ;; 'c'
      (then
        (loop $more
          (if (i32.lt_u (table.size $t) (i32.const 50000000))
            (then
              (br_if $more (i32.ne (table.grow $t (ref.null func) (i32.const 1000000)) (i32.const -1))))))
        (return (call $reply (table.size $t)))))
    (i64.const 0x200_00000003)))
