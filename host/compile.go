package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/tinyhost/tinyhost/abi"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/internal/guest"
	"github.com/tinyhost/tinyhost/host/internal/instrument"
)

// interruptGlobal is the name of the global that instrument adds to every
// module; setting it to 1 makes the guest trap within pollInterval
// function calls and loop iterations.
const interruptGlobal = guest.InterruptGlobal

// startExport is the name under which instrument exports a module's start
// function (instrument.WithStart), for newInstance to call under the
// watchdog instead of wazero inside instantiation.
const startExport = guest.StartExport

// pollInterval is how many function calls and loop iterations a guest runs
// between exits from compiled code to Go (instrument.WithPoll). Compiled
// wasm cannot be preempted by the Go runtime, so without these exits a
// spinning guest would block every stop-the-world (each garbage
// collection) and so the whole process, watchdog included. An exit costs
// around 100 ns; at least a nanosecond per call or iteration makes this
// well under 1% of hot code, and bounds the pause a spinning guest adds to
// a collection to tens of microseconds.
var pollInterval uint32 = 1 << 14

// compileTimeoutError is the cause of a compile cut off by CompileTimeout.
type compileTimeoutError struct{ d time.Duration }

func (e *compileTimeoutError) Error() string {
	return fmt.Sprintf("took longer than the compile timeout of %v", e.d)
}

func (e *compileTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// compiled is what compile makes of a module.
type compiled struct {
	code wazero.CompiledModule
	// took is the time wazero took (the rewrite aside), which tells a
	// compile from a cache hit.
	took time.Duration
	// start says the module has a start function, exported as startExport.
	start bool
	// tableElements is the most elements the module's tables can hold.
	tableElements uint64
	// globals are the mutable globals, exported for a snapshot
	// (Options.Snapshots); tableWrites, manyGlobals and optIn are what
	// decide one.
	globals     []uint32
	tableWrites bool
	manyGlobals bool // too many to export: none is
	optIn       bool
}

// compile rewrites wasm (see "Timeouts" in the package doc), checks its
// interface and compiles it within the host's bounds: its estimated
// memory (compileCost) admitted against the host's memory budget (a load
// waits for room as long as ctx allows, and fails at once when the budget
// could never hold it), at most MaxCompiles at once (a load waits for a
// slot as long as ctx allows), each for at most CompileTimeout, and none
// past Close.
//
// wazero checks the context between functions when it compiles with
// several workers, so a compile cut off stops soon; decoding, validating
// and one function's code cannot be interrupted. The load fails at the
// deadline all the same, and the compile keeps its slot (and the runtime
// stays open) until it has really ended, so that the bound on compiles at
// once holds.
//
// With key, the rewrite is looked up in and kept in the rewrite cache
// (rewritecache.go); a snapshot, whose bytes no later load repeats, has
// none.
func (h *Host) compile(ctx context.Context, wasm []byte, pages uint32, key *sharedKey) (*compiled, error) {
	ctx, stop := h.loadContext(ctx)
	defer stop()
	cost, functions := compileCost(wasm)
	giveBack, err := h.admitCompile(ctx, cost, functions, len(wasm))
	if err != nil {
		return nil, err
	}
	select {
	case h.compiles <- struct{}{}:
	case <-ctx.Done():
		giveBack()
		return nil, fmt.Errorf("waiting for a compile slot (%d at once): %w", cap(h.compiles), context.Cause(ctx))
	}
	if !h.holdRuntime() {
		<-h.compiles
		giveBack()
		return nil, api.ErrClosed
	}
	cctx, cancel := context.WithTimeoutCause(ctx, h.opts.CompileTimeout, &compileTimeoutError{h.opts.CompileTimeout})
	defer cancel()

	type result struct {
		c   *compiled
		err error
	}
	done := make(chan result)
	abandoned := make(chan struct{})
	go func() {
		defer func() {
			<-h.compiles
			giveBack()
			h.releaseRuntime()
		}()
		c, err := h.compileNow(cctx, wasm, pages, key)
		select {
		case done <- result{c, err}:
		case <-abandoned:
			if c != nil {
				_ = c.code.Close(context.Background())
			}
		}
	}()
	select {
	case r := <-done:
		if r.err != nil && cctx.Err() != nil {
			r.err = cutOff(cctx) // wazero's error says only that ctx ended
		}
		return r.c, r.err
	case <-cctx.Done():
		close(abandoned)
		return nil, cutOff(cctx)
	}
}

// cutOff is the error of a compile whose context ended: KindTimeout when
// CompileTimeout passed; otherwise the caller gave up or the host closed.
func cutOff(cctx context.Context) error {
	err := fmt.Errorf("compile: %w", context.Cause(cctx))
	var te *compileTimeoutError
	if errors.As(err, &te) {
		return withKind(api.KindTimeout, err)
	}
	return err
}

// compileNow does the work of compile: the rewrite, for the memory limit
// of pages, and wazero's compile. A panic in either is an error for this
// module.
func (h *Host) compileNow(ctx context.Context, wasm []byte, pages uint32, key *sharedKey) (c *compiled, err error) {
	defer guest.Recovered(h.log, "compile", &err)
	if hook := guest.PanicHook.Load(); hook != nil {
		(*hook)("compile")
	}
	var rkey *rewriteKey
	if key != nil {
		rkey = &rewriteKey{sharedKey: *key, globals: h.opts.Snapshots.on()}
	}
	res, check := h.cachedRewrite(rkey)
	if res == nil {
		if res, err = h.rewrite(wasm, pages); err != nil {
			return nil, err
		}
	}
	code, took, err := h.compileRewrite(ctx, res, check)
	if errors.Is(err, errRewriteChanged) {
		check = nil
		if res, err = h.rewrite(wasm, pages); err != nil {
			return nil, err
		}
		code, took, err = h.compileRewrite(ctx, res, nil)
	}
	if err != nil {
		return nil, err
	}
	if rkey != nil && check == nil {
		h.keepRewrite(*rkey, res)
	}
	optIn := slices.ContainsFunc(res.Exports, func(e instrument.Export) bool { return e.Name == abi.ExportSnapshot })
	return &compiled{code: code, took: took, start: res.Start, tableElements: res.TableElements,
		globals: res.Globals, tableWrites: res.TableWrites, manyGlobals: res.ManyGlobals, optIn: optIn}, nil
}

// checkFirstBytes is the size under which a cached rewrite is hashed
// before it compiles rather than meanwhile: a fraction of a millisecond.
const checkFirstBytes = 1 << 20

// errRewriteChanged is compileRewrite's error when check found the
// rewrite's bytes other than those the host wrote.
var errRewriteChanged = errors.New("the cached rewrite changed")

// compileRewrite checks res's interface and compiles it, returning the
// time wazero took. With check (see cachedRewrite), res's bytes are
// checked while they compile, and the compile is thrown away, with
// errRewriteChanged, unless they are those the host wrote.
func (h *Host) compileRewrite(ctx context.Context, res *instrument.Result, check func() bool) (wazero.CompiledModule, time.Duration, error) {
	// A cached rewrite's interface was checked when it was kept (its
	// entry keeps no export list to check again).
	if check == nil {
		if err := checkInterface(res); err != nil {
			var verr *api.VersionError
			if errors.As(err, &verr) {
				return nil, 0, err
			}
			return nil, 0, withKind(api.KindABIViolation, err)
		}
	}
	// A small rewrite is hashed first: wazero would compile it, and
	// write its code to the compilation cache, before the hash ended.
	if check != nil && len(res.Wasm) < checkFirstBytes {
		if !check() {
			return nil, 0, errRewriteChanged
		}
		check = nil
	}
	var (
		checked chan bool
		before  map[string]bool
	)
	if check != nil {
		// What compiles may not be the module's, and wazero may write
		// its code to the compilation cache before the check ends: what
		// it adds is removed should the check fail.
		before = h.compiledNames()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		checked = make(chan bool, 1)
		go func() {
			ok := check()
			if !ok {
				cancel() // what compiles is not the module's
			}
			checked <- ok
		}()
	}
	// A Go guest has thousands of functions: compile them on every core,
	// and on two workers at least, since wazero checks ctx only between
	// the functions of a compile with several.
	workers := max(2, runtime.GOMAXPROCS(0))
	start := time.Now()
	code, err := h.compileModule(experimental.WithCompilationWorkers(ctx, workers), res.Wasm)
	took := time.Since(start)
	if checked != nil && !<-checked {
		if err == nil {
			_ = code.Close(context.Background())
		}
		h.removeCompiledSince(before)
		return nil, 0, errRewriteChanged
	}
	if err != nil {
		return nil, 0, fmt.Errorf("compile: %w", err)
	}
	return code, took, nil
}

// rewrite instruments wasm for the memory limit of pages (see "Timeouts"
// in the package doc).
func (h *Host) rewrite(wasm []byte, pages uint32) (*instrument.Result, error) {
	opts := []instrument.Option{
		instrument.WithPoll(pollInterval),
		instrument.WithStart(startExport),
		instrument.WithMaxTableElements(tableBudget(pages)),
	}
	if h.opts.Snapshots.on() {
		opts = append(opts, instrument.WithGlobalExports(globalExportPrefix))
	}
	res, err := instrument.Rewrite(wasm, interruptGlobal, opts...)
	if err != nil {
		var tle *instrument.TableLimitError
		switch {
		case errors.Is(err, instrument.ErrNotWasm):
			return nil, errors.New("not a WebAssembly module")
		case errors.As(err, &tle):
			return nil, withKind(api.KindMemory, fmt.Errorf("tables of %d elements exceed the limit of %d elements (1/%d of the memory limit of %d pages, %d bytes an element)",
				tle.Initial, tle.Limit, tableShare, pages, tableElementBytes))
		}
		return nil, err
	}
	return res, nil
}

// checkInterface checks what can be checked before compiling: the declared
// ABI version, the exports ABI v1 requires and the imports.
func checkInterface(res *instrument.Result) error {
	var versions []string
	exports := map[string]instrument.Kind{}
	for _, e := range res.Exports {
		exports[e.Name] = e.Kind
		if strings.HasPrefix(e.Name, abi.VersionExportPrefix) {
			versions = append(versions, e.Name)
		}
	}
	switch len(versions) {
	case 0:
		return fmt.Errorf("%w (no %s export)", errNotModule, abi.VersionExport)
	case 1:
	default:
		return fmt.Errorf("%w: exports %d ABI versions (%s), want exactly one", errNotModule, len(versions), strings.Join(versions, ", "))
	}
	n, err := strconv.Atoi(strings.TrimPrefix(versions[0], abi.VersionExportPrefix))
	if err != nil || n < 1 {
		return fmt.Errorf("%w: bad version export %q", errNotModule, versions[0])
	}
	if n != abi.Version {
		return &api.VersionError{Got: n, Want: abi.Version}
	}

	var missing []string
	for _, want := range []struct {
		name string
		kind instrument.Kind
	}{
		{abi.ExportDescribe, instrument.KindFunc},
		{abi.ExportBuffer, instrument.KindFunc},
		{abi.ExportHandle, instrument.KindFunc},
		{"memory", instrument.KindMemory},
	} {
		if k, ok := exports[want.name]; !ok || k != want.kind {
			missing = append(missing, want.kind.String()+" "+want.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("ABI v%d exports missing: %s", abi.Version, strings.Join(missing, ", "))
	}

	var unknown []string
	for _, im := range res.Imports {
		switch im.Module {
		case "wasi_snapshot_preview1":
			continue
		case abi.ImportModule:
			if slices.Contains(guest.HostFunctionNames, im.Name) && im.Kind == instrument.KindFunc {
				continue
			}
		}
		unknown = append(unknown, im.Module+"."+im.Name)
	}
	if len(unknown) > 0 {
		return fmt.Errorf("imports that this host does not provide: %s", strings.Join(unknown, ", "))
	}
	return nil
}
