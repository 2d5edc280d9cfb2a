;; counter: an ABI v1 guest by hand whose _initialize sets a counter in its
;; second page to 10 and fills a run of its first; each message adds one to
;; the counter and gets an ok whose payload is the counter's low byte, and a
;; message whose payload ends in "g" also grows the memory by a page. Instances that
;; share memory, or one that starts from another's state, count on from
;; each other's counts.
(module
  (memory (export "memory") 2)
  (data (i32.const 1024) "{\"abi\":1,\"name\":\"wat\",\"version\":\"1.0.0\",\"components\":[{\"name\":\"c\",\"ports\":[{\"name\":\"in\",\"direction\":\"input\"},{\"name\":\"out\",\"direction\":\"output\"}]}]}")

  (func (export "_initialize") (local $i i32)
    (i32.store (i32.const 70000) (i32.const 10))
    (loop $next
      (i32.store8 (i32.add (i32.const 16384) (local.get $i)) (i32.const 7))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 1000)))))

  (func (export "tinyhost_abi_v1"))

  (func (export "tinyhost_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 148)))

  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 32768))
      (then (i32.const 0))
      (else (i32.const 8192))))

  ;; The request's last byte is its payload's when it has one (else its
  ;; metadata count's, or its port name's).
  (func (export "tinyhost_handle") (param $n i32) (result i64)
    (i32.store (i32.const 70000) (i32.add (i32.load (i32.const 70000)) (i32.const 1)))
    (if (i32.eq (i32.load8_u (i32.add (i32.const 8191) (local.get $n))) (i32.const 0x67))
      (then (drop (memory.grow (i32.const 1)))))
    (i32.store8 (i32.const 3000) (i32.const 0))
    (i32.store8 (i32.const 3001) (i32.load8_u (i32.const 70000)))
    (i64.or (i64.shl (i64.const 3000) (i64.const 32)) (i64.const 2)))
)
