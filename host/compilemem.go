package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/watchdog"
)

// What compiling a module costs in memory, at its peak, as measured on
// amd64 (BenchmarkCompileMemory, in make bench): 680 to 830 bytes of
// resident memory per function (generated modules of 100,000 to 400,000
// empty functions; one of a million, 4 MB, would peak near 800 MiB), and
// 17 to 27 bytes per byte of module for code of substance (standard Go
// guests of 3 to 4 MB and about 2,000 functions peak 60 to 92 MiB above
// the host's rest). The estimate rounds both up, and counts the whole
// module as code.
const (
	compileBytesPerByte     = 32
	compileBytesPerFunction = 1024
)

// compileCost is the estimated peak memory of compiling wasm, and the
// number of functions it was estimated from.
func compileCost(wasm []byte) (cost, functions uint64) {
	functions = functionCount(wasm)
	return uint64(len(wasm))*compileBytesPerByte + functions*compileBytesPerFunction, functions
}

// functionCount returns the number of function bodies of a module: the
// count that opens its code section, 0 when it cannot find one (the
// rewrite then refuses the module, at the cost of its bytes alone).
func functionCount(wasm []byte) uint64 {
	if len(wasm) < 8 {
		return 0
	}
	b := wasm[8:]
	for len(b) > 0 {
		id := b[0]
		size, n := binary.Uvarint(b[1:])
		if n <= 0 || size > uint64(len(b)-1-n) {
			return 0
		}
		body := b[1+n : 1+n+int(size)]
		if id == 10 {
			count, n := binary.Uvarint(body)
			if n <= 0 {
				return 0
			}
			return count
		}
		b = b[1+n+int(size):]
	}
	return 0
}

// compileMemory is the share of the host's memory budget that compiles in
// progress hold, so that compiles run at once only as far as the budget
// has room for them.
type compileMemory struct {
	mu    sync.Mutex
	inUse uint64
	freed chan struct{} // closed, and replaced, when memory is given back
}

// admitCompile takes cost bytes of the host's memory budget for a compile,
// waiting as long as ctx allows while other compiles hold what it needs.
// It fails at once, with ErrCapacity naming the figures, when the budget
// less the linear memory the instances hold cannot hold it. It counts the
// instances' memory, not what the modules hold: a reservation is what
// the instances may grow to, and a host whose modules hold its whole
// budget must still be able to compile the upgrade of a module. It returns the
// function that gives the memory back.
func (h *Host) admitCompile(ctx context.Context, cost, functions uint64, size int) (func(), error) {
	budget := h.opts.Capacity.MemoryBytes
	if budget == 0 || budget == NoMemoryBound {
		return func() {}, nil
	}
	c := &h.compileMem
	for {
		live := h.liveMemory()
		room := uint64(0)
		if live < budget {
			room = budget - live
		}
		if cost > room {
			return nil, fmt.Errorf("%w: compiling the module would take an estimated %d MiB (%d bytes × %d + %d functions × %d bytes), more than the %d MiB the host's memory budget of %d MiB (%s) leaves beside the %d MiB its instances hold",
				api.ErrCapacity, cost>>20, size, compileBytesPerByte, functions, compileBytesPerFunction, room>>20, budget>>20, h.opts.budgetNote, live>>20)
		}
		c.mu.Lock()
		if c.inUse+cost <= room {
			c.inUse += cost
			c.mu.Unlock()
			return func() {
				c.mu.Lock()
				c.inUse -= cost
				if c.freed != nil {
					close(c.freed)
					c.freed = nil
				}
				c.mu.Unlock()
			}, nil
		}
		if c.freed == nil {
			c.freed = make(chan struct{})
		}
		freed := c.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %d MiB of the memory budget to compile (other compiles hold it): %w", cost>>20, context.Cause(ctx))
		}
	}
}

// liveMemory is the linear memory of every live instance, summed.
func (h *Host) liveMemory() uint64 {
	var n uint64
	h.dog.Each(func(t watchdog.Target) { n += guest.Of(t).MemorySize() })
	return n
}
