;; echo: an ABI v1 guest by hand, without a language runtime. Module "wat",
;; component "c": port "in" replies with the payload, system ports with an
;; empty ok, any other port with status 2. The reply is written in place:
;; the status byte goes just before the payload in the request buffer.
(module
  (memory (export "memory") 1 16)

  ;; The descriptor, at 1024.
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")
  ;; Canned responses: ok (status 0, empty), not found (status 2), bad
  ;; request (status 8).
  (data (i32.const 2048) "\00")
  (data (i32.const 2056) "\02no such port")
  (data (i32.const 2072) "\08bad request")

  ;; The request buffer starts at 4096 and ends with the memory.
  (global $pos (mut i32) (i32.const 0))
  (global $end (mut i32) (i32.const 0))
  (global $str (mut i32) (i32.const 0))
  (global $len (mut i32) (i32.const 0))

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  ;; The buffer grows the memory to hold size bytes from 4096.
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (local $need i32)
    (local.set $need
      (i32.shr_u (i32.add (i32.add (local.get $size) (i32.const 4096)) (i32.const 65535)) (i32.const 16)))
    (if (i32.gt_u (local.get $need) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $need) (memory.size))) (i32.const -1))
          (then (return (i32.const 0))))))
    (i32.const 4096))

  ;; uvarint reads an unsigned LEB128 at $pos and moves past it; -1 when it
  ;; is malformed or runs past $end.
  (func $uvarint (result i32)
    (local $v i32) (local $shift i32) (local $b i32)
    (block $done
      (loop $next
        (if (i32.ge_u (global.get $pos) (global.get $end)) (then (return (i32.const -1))))
        (local.set $b (i32.load8_u (global.get $pos)))
        (global.set $pos (i32.add (global.get $pos) (i32.const 1)))
        (local.set $v (i32.or (local.get $v)
          (i32.shl (i32.and (local.get $b) (i32.const 0x7f)) (local.get $shift))))
        (local.set $shift (i32.add (local.get $shift) (i32.const 7)))
        (br_if $done (i32.eqz (i32.and (local.get $b) (i32.const 0x80))))
        (br_if $next (i32.lt_u (local.get $shift) (i32.const 35)))
        (return (i32.const -1))))
    (local.get $v))

  ;; string reads a string into $str and $len; 0 when malformed.
  (func $string (result i32)
    (local $n i32)
    (local.set $n (call $uvarint))
    (if (i32.gt_u (local.get $n) (i32.sub (global.get $end) (global.get $pos)))
      (then (return (i32.const 0))))
    (global.set $str (global.get $pos))
    (global.set $len (local.get $n))
    (global.set $pos (i32.add (global.get $pos) (local.get $n)))
    (i32.const 1))

  (func $reply (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len))))

  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (local $count i32)
    (global.set $pos (i32.const 4096))
    (global.set $end (i32.add (i32.const 4096) (local.get $n)))
    ;; module, component, port
    (if (i32.eqz (call $string)) (then (return (call $reply (i32.const 2072) (i32.const 12)))))
    (if (i32.eqz (call $string)) (then (return (call $reply (i32.const 2072) (i32.const 12)))))
    (if (i32.eqz (call $string)) (then (return (call $reply (i32.const 2072) (i32.const 12)))))
    (if (i32.and (i32.ne (global.get $len) (i32.const 0))
                 (i32.eq (i32.load8_u (global.get $str)) (i32.const 0x5f)))
      (then (return (call $reply (i32.const 2048) (i32.const 1)))))
    (if (i32.or (i32.ne (global.get $len) (i32.const 2))
                (i32.ne (i32.load16_u (global.get $str)) (i32.const 0x6e69)))
      (then (return (call $reply (i32.const 2056) (i32.const 13)))))
    ;; metadata: count × (key, value)
    (local.set $count (call $uvarint))
    (if (i32.lt_s (local.get $count) (i32.const 0)) (then (return (call $reply (i32.const 2072) (i32.const 12)))))
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $count)))
        (if (i32.eqz (call $string)) (then (return (call $reply (i32.const 2072) (i32.const 12)))))
        (if (i32.eqz (call $string)) (then (return (call $reply (i32.const 2072) (i32.const 12)))))
        (local.set $count (i32.sub (local.get $count) (i32.const 1)))
        (br $next)))
    ;; The payload is the rest; the byte before it becomes the status.
    (i32.store8 (i32.sub (global.get $pos) (i32.const 1)) (i32.const 0))
    (call $reply (i32.sub (global.get $pos) (i32.const 1))
                 (i32.add (i32.sub (global.get $end) (global.get $pos)) (i32.const 1))))
)
