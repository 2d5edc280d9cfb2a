;; unfetched makes an HTTP GET of the URL its payload names (under 128
;; bytes), with out_cap 0 and no tinyhost_result_buffer, and never fetches
;; the result: the response is left pending when the call ends. It
;; answers ok with one byte, the status of the host's answer. Messages
;; carry no metadata. Built with /usr/bin/wat2wasm (wabt 1.0.32).
(module
  (import "tinyhost_v1" "http" (func $http (param i32 i32 i32 i32) (result i64)))
  ;; 256: descriptor; 4096..8189: request buffer; 8190: the response;
  ;; 16384: the HTTP request.
  (memory (export "memory") 1)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"unfetched\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"get\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x10000000077))
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 4094))))
  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (local $p i32) (local $len i32) (local $r i64)
    ;; Skip module, component and port (a one-byte length each) and the
    ;; metadata count: the rest is the URL.
    (local.set $p (i32.const 4096))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.add (i32.const 1) (i32.load8_u (local.get $p)))))
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (local.set $len (i32.sub (i32.add (i32.const 4096) (local.get $n)) (local.get $p)))
    ;; method "" (GET), the URL, no headers, no body
    (i32.store8 (i32.const 16384) (i32.const 0))
    (i32.store8 (i32.const 16385) (local.get $len))
    (memory.copy (i32.const 16386) (local.get $p) (local.get $len))
    (i32.store8 (i32.add (i32.const 16386) (local.get $len)) (i32.const 0))
    (local.set $r (call $http (i32.const 16384) (i32.add (local.get $len) (i32.const 3)) (i32.const 0) (i32.const 0)))
    (i32.store8 (i32.const 8190) (i32.const 0))
    (i32.store8 (i32.const 8191) (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))))
    (i64.const 0x00001ffe00000002)))
