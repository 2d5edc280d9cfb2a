;; sender sends messages without waiting. On port send, the payload is a
;; count N (one byte) and then an encoded Message (ABI.md 4.1) addressed to
;; module/component/port; sender sends it N times with the send import and
;; answers ok with the status of each send, one byte each, then the reason
;; the host gave with the last one. It expects requests without metadata.
(module
  (import "tinyhost_v1" "send" (func $send (param i32 i32 i32 i32) (result i64)))
  ;; 0..4095: descriptor, response; 4096..: request buffer.
  (memory (export "memory") 1)
  (data (i32.const 256) "{\"abi\":1,\"name\":\"sender\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"s\",\"ports\":[{\"name\":\"send\",\"direction\":\"input\"}]}]}")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x0000010000000075)) ;; descriptor at 256, 117 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (local $p i32) (local $port i32) (local $msg i32) (local $len i32)
    (local $count i32) (local $i i32) (local $r i64) (local $reason i32)
    ;; Skip module and component; $port is the port's first byte, $p the
    ;; metadata count, one byte: 0.
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (local.set $port (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
    (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))
    (i32.store8 (i32.const 2048) (i32.const 0))
    (if (i32.ne (local.get $port) (i32.const 115)) ;; not s: answer ok
      (then (return (i64.const 0x0000080000000001))))
    (local.set $count (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
    (local.set $msg (i32.add (local.get $p) (i32.const 2)))
    (local.set $len (i32.sub (i32.add (i32.const 4096) (local.get $n)) (local.get $msg)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        ;; The reason goes after the statuses: at 2049 + count.
        (local.set $r (call $send (local.get $msg) (local.get $len)
          (i32.add (i32.const 2049) (local.get $count)) (i32.const 1000)))
        (i32.store8 (i32.add (i32.const 2049) (local.get $i))
          (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))))
        (local.set $reason (i32.wrap_i64 (local.get $r)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (if (i32.gt_u (local.get $reason) (i32.const 1000))
      (then (local.set $reason (i32.const 0))))
    (i64.or (i64.const 0x0000080000000000)
      (i64.extend_i32_u (i32.add (i32.add (i32.const 1) (local.get $count)) (local.get $reason))))))
