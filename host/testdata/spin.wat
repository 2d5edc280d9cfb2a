;; spin spins: port spin and every tick loop for ever; port arm sets a
;; 10 ms timer on component s and answers ok; _settings answers ok.
(module
  (import "tinyhost_v1" "timer" (func $timer (param i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 256) "{\22abi\22:1,\22name\22:\22spin\22,\22version\22:\221.0.0\22,\22components\22:[{\22name\22:\22s\22,\22ports\22:[{\22name\22:\22spin\22,\22direction\22:\22input\22},{\22name\22:\22arm\22,\22direction\22:\22input\22}]}]}")
  ;; a Timer request: component "s", 10 ms
  (data (i32.const 1536) "\01s\0a")
  (data (i32.const 2048) "\00")
  (func (export "tinyhost_abi_v1"))
  (func (export "tinyhost_describe") (result i64)
    (i64.const 0x0000010000000096)) ;; descriptor at 256, 150 bytes
  (func (export "tinyhost_buffer") (param $size i32) (result i32)
    (select (i32.const 4096) (i32.const 0) (i32.le_u (local.get $size) (i32.const 61440))))
  ;; name returns the address of the request's port name (ABI.md 4.1;
  ;; every length is under 128, so each is one byte).
  (func $name (result i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 4097) (i32.load8_u (i32.const 4096))))
    (i32.add (i32.add (local.get $p) (i32.const 2)) (i32.load8_u (local.get $p))))
  (func (export "tinyhost_handle") (param i32) (result i64)
    (local $p i32)
    (local.set $p (call $name))
    (if (i32.eq (i32.load8_u (local.get $p)) (i32.const 97)) ;; arm
      (then (drop (call $timer (i32.const 1536) (i32.const 3) (i32.const 2100) (i32.const 64)))
        (return (i64.const 0x0000080000000001))))
    (if (i32.and (i32.eq (i32.load8_u (local.get $p)) (i32.const 95)) ;; _settings
        (i32.eq (i32.load8_u (i32.add (local.get $p) (i32.const 1))) (i32.const 115)))
      (then (return (i64.const 0x0000080000000001))))
    (loop $forever (br $forever))
    (unreachable))) ;; status ok at 2048
