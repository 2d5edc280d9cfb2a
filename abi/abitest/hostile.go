package abitest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tinyhost/tinyhost/abi"
)

// Limits of the hostile guests. Each is far below the host's defaults, so
// that a guest that gets past one is caught quickly.
const (
	hostileTimeout = 200 * time.Millisecond // CallTimeout of a guest that never returns
	hostilePages   = 256                    // MemoryPages (16 MiB) of a guest that grows
	// funcrefSize is what one table slot costs a host at the least: a
	// pointer. A table that a host counts against MemoryPages has at most
	// that many bytes' worth of slots.
	funcrefSize = 8
	// minTimerInterval is the shortest interval the suite expects a host to
	// honour: a host refuses a shorter one or raises it to its minimum,
	// which must be at least this.
	minTimerInterval = 10 * time.Millisecond
)

// testHostile runs every hostile guest, one method each, and checks after
// each that the echo module still answers.
func (s *suite) testHostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"loop", s.hostileLoop},
		{"membomb", s.hostileMembomb},
		{"inittrap", s.hostileInittrap},
		{"badptr", s.hostileBadptr},
		{"baddescribe", s.hostileBaddescribe},
		{"badjson", s.hostileBadjson},
		{"badrules", s.hostileBadrules},
		{"abiv2", s.hostileAbiv2},
		{"noversion", s.hostileNoversion},
		{"gopanic", s.hostileGopanic},
		{"blocker", s.hostileBlocker},
		{"notwasm", s.hostileNotwasm},
		{"truncated", s.hostileTruncated},
		{"globalset", s.hostileGlobalset},
		{"pollcall", s.hostilePollcall},
		{"initloop", s.hostileInitloop},
		{"describeloop", s.hostileDescribeloop},
		{"bufferloop", s.hostileBufferloop},
		{"memgrow", s.hostileMemgrow},
		{"bigmemory", s.hostileBigmemory},
		{"tablegrow", s.hostileTablegrow},
		{"bigtable", s.hostileBigtable},
		{"stdout-nolog", s.hostileStdoutNolog},
		{"stdout-log", s.hostileStdoutLog},
		{"timers", s.hostileTimers},
		{"timerfail", s.hostileTimerfail},
		{"flood", s.hostileFlood},
		{"sysports", s.hostileSysports},
		{"garbage", s.hostileGarbage},
		// Last: a host that cannot stop these may never get its process
		// back.
		{"startloop", s.hostileStartloop},
		{"recurse", s.hostileRecurse},
		{"settingsrecurse", s.hostileSettingsrecurse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.test(t)
			// Whatever the guest did, the other modules are untouched.
			s.serves(t, s.echo, "echo", "in")
		})
	}
}

func (s *suite) hostileLoop(t *testing.T) {
	m := s.mustLoad(t, "loop", LoadSpec{CallTimeout: hostileTimeout})
	start := time.Now()
	err := s.mustFail(t, m, "spinner", "spin", nil, KindTimeout)
	wantMention(t, err, "loop", "spinner")
	if d := time.Since(start); d > 50*hostileTimeout {
		t.Errorf("spin returned after %v with CallTimeout %v", d, hostileTimeout)
	}
	s.serves(t, m, "spinner", "in")
}

func (s *suite) hostileMembomb(t *testing.T) {
	m := s.mustLoad(t, "membomb", LoadSpec{MemoryPages: 1024, CallTimeout: 20 * time.Second})
	err := s.mustFail(t, m, "hog", "grow", nil, KindMemory)
	wantMention(t, err, "membomb", "hog")
	s.serves(t, m, "hog", "in")
}

func (s *suite) hostileInittrap(t *testing.T) {
	err := s.mustFailLoad(t, "inittrap", LoadSpec{})
	s.wantKind(t, err, KindTrap)
	wantMention(t, err, "initializ")
}

func (s *suite) hostileBadptr(t *testing.T) {
	m := s.mustLoad(t, "badptr", LoadSpec{})
	err := s.mustFail(t, m, "liar", "in", nil, KindABI)
	wantMention(t, err, "badptr", "liar")
	s.serves(t, m, "liar", "ok")
}

func (s *suite) hostileBaddescribe(t *testing.T) {
	err := s.mustFailLoad(t, "baddescribe", LoadSpec{})
	s.wantKind(t, err, KindABI)
	wantMention(t, err, "descri")
}

func (s *suite) hostileBadjson(t *testing.T) {
	err := s.mustFailLoad(t, "badjson", LoadSpec{})
	s.wantKind(t, err, KindABI)
	wantMention(t, err, "descriptor", "json")
}

func (s *suite) hostileBadrules(t *testing.T) {
	err := s.mustFailLoad(t, "badrules", LoadSpec{})
	s.wantKind(t, err, KindABI)
	// Every broken rule is listed.
	wantMention(t, err, "descriptor", `"Echo"`, "twice", "sideways")
}

func (s *suite) hostileAbiv2(t *testing.T) {
	err := s.mustFailLoad(t, "abiv2", LoadSpec{})
	s.wantKind(t, err, KindVersion)
	wantMention(t, err, "v2", "v1")
}

func (s *suite) hostileNoversion(t *testing.T) {
	err := s.mustFailLoad(t, "noversion", LoadSpec{})
	s.wantKind(t, err, KindVersion, KindABI)
	wantMention(t, err, "not a tinyhost module")
}

func (s *suite) hostileGopanic(t *testing.T) {
	m := s.mustLoad(t, "gopanic", LoadSpec{})
	err := s.mustFail(t, m, "panicker", "in", nil, KindTrap)
	wantMention(t, err, "gopanic", "panicker")
	s.serves(t, m, "panicker", "ok")
}

func (s *suite) hostileBlocker(t *testing.T) {
	m := s.mustLoad(t, "blocker", LoadSpec{CallTimeout: 2 * time.Second})
	err := s.mustFail(t, m, "waiter", "in", nil, KindTrap, KindTimeout)
	wantMention(t, err, "blocker", "waiter")
	s.serves(t, m, "waiter", "ok")
}

// notWasm and truncated are the bytes of the guests "notwasm" and
// "truncated", which are not modules: text, and a wasm header followed by a
// type section that declares 4 GiB and as many types.
var (
	notWasm   = []byte("this is a text file, not a WebAssembly module\n")
	truncated = []byte("\x00asm\x01\x00\x00\x00" + "\x01\xff\xff\xff\xff\x0f" + "\xff\xff\xff\xff\x0f\x60")
)

func (s *suite) hostileNotwasm(t *testing.T) {
	err := s.mustRefuse(t, "notwasm", notWasm, LoadSpec{}, loadDeadline)
	s.wantKind(t, err, KindNone, KindABI)
}

func (s *suite) hostileTruncated(t *testing.T) {
	err := s.mustRefuse(t, "truncated", truncated, LoadSpec{}, loadDeadline)
	s.wantKind(t, err, KindNone, KindABI)
}

// hostileGlobalset and hostilePollcall load modules that use the index of a
// global or a function they do not have, the one a host's rewrite would
// add: a host must validate a module before it changes it.
func (s *suite) hostileGlobalset(t *testing.T) {
	err := s.mustFailLoad(t, "globalset", LoadSpec{CallTimeout: hostileTimeout})
	s.wantKind(t, err, KindNone, KindABI)
	wantMention(t, err, "global")
}

func (s *suite) hostilePollcall(t *testing.T) {
	err := s.mustFailLoad(t, "pollcall", LoadSpec{CallTimeout: hostileTimeout})
	s.wantKind(t, err, KindNone, KindABI)
	wantMention(t, err, "function")
}

// refusedWithin loads a guest whose load runs guest code that never returns:
// the host must stop it with a timeout.
func (s *suite) refusedWithin(t *testing.T, name string, words ...string) {
	t.Helper()
	start := time.Now()
	err := s.mustRefuse(t, name, Guest(t, name), LoadSpec{CallTimeout: hostileTimeout}, hostileLoadDeadline)
	t.Logf("refused after %v", time.Since(start).Round(time.Millisecond))
	s.wantKind(t, err, KindTimeout)
	wantMention(t, err, words...)
}

func (s *suite) hostileInitloop(t *testing.T)     { s.refusedWithin(t, "initloop", "initializ") }
func (s *suite) hostileDescribeloop(t *testing.T) { s.refusedWithin(t, "describeloop", "describe") }
func (s *suite) hostileBufferloop(t *testing.T)   { s.refusedWithin(t, "bufferloop", "buffer") }
func (s *suite) hostileStartloop(t *testing.T)    { s.refusedWithin(t, "startloop") }

func (s *suite) hostileSettingsrecurse(t *testing.T) {
	s.refusedWithin(t, "settingsrecurse", "settingsrecurse", abi.PortSettings)
}

func (s *suite) hostileRecurse(t *testing.T) {
	m := s.mustLoad(t, "recurse", LoadSpec{CallTimeout: hostileTimeout})
	err := s.mustFail(t, m, "r", "in", nil, KindTimeout)
	wantMention(t, err, "recurse")
	s.answersOK(t, m, "r")
}

// answersOK checks that a hand-written guest's ok port answers "ok".
func (s *suite) answersOK(t *testing.T, m Module, component string) {
	t.Helper()
	if r := s.mustInvoke(t, m, component, "ok", nil); string(r.Payload) != "ok" {
		t.Errorf("%s/%s/ok answered %q, want ok", m.Name(), component, r.Payload)
	}
}

// uint32Reply decodes the 4-byte little-endian reply of a hand-written guest.
func uint32Reply(t *testing.T, r Result) uint32 {
	t.Helper()
	if len(r.Payload) != 4 {
		t.Fatalf("reply %q, want 4 bytes", r.Payload)
	}
	return binary.LittleEndian.Uint32(r.Payload)
}

// grown invokes a port that grows a memory or a table until refused: the
// call fails with KindMemory, or answers a size in units of unit bytes that
// stays within the module's MemoryPages.
func (s *suite) grown(t *testing.T, m Module, component, port string, unit uint64) {
	t.Helper()
	r, err := invoke(t, m, component, port, nil)
	if err != nil {
		t.Logf("%s: %v", port, err)
		s.wantKind(t, err, KindMemory)
		return
	}
	n := uint64(uint32Reply(t, r))
	t.Logf("%s: %d × %d bytes", port, n, unit)
	if limit := uint64(hostilePages) * 65536; n*unit > limit {
		t.Errorf("%s/%s/%s grew to %d × %d bytes, past the memory limit of %d bytes", m.Name(), component, port, n, unit, limit)
	}
}

func (s *suite) hostileMemgrow(t *testing.T) {
	m := s.mustLoad(t, "memgrow", LoadSpec{MemoryPages: hostilePages})
	s.grown(t, m, "m", "grow", 65536)
	s.answersOK(t, m, "m")
}

func (s *suite) hostileBigmemory(t *testing.T) {
	// The guest declares 5000 pages.
	err := s.mustFailLoad(t, "bigmemory", LoadSpec{MemoryPages: 4096})
	s.wantKind(t, err, KindMemory)
	wantMention(t, err, "memory")
}

func (s *suite) hostileTablegrow(t *testing.T) {
	m := s.mustLoad(t, "tablegrow", LoadSpec{MemoryPages: hostilePages})
	s.grown(t, m, "t", "grow", funcrefSize)
	s.grown(t, m, "t", "creep", funcrefSize)
	s.answersOK(t, m, "t")
}

func (s *suite) hostileBigtable(t *testing.T) {
	err := s.mustFailLoad(t, "bigtable", LoadSpec{MemoryPages: hostilePages})
	s.wantKind(t, err, KindMemory)
}

// flood writes a megabyte without a newline to stdout and to stderr.
func (s *suite) flood(t *testing.T, m Module) {
	t.Helper()
	for _, port := range []string{"out", "err"} {
		if r := s.mustInvoke(t, m, "w", port, nil); string(r.Payload) != "ok" {
			t.Errorf("%s answered %q, want ok", port, r.Payload)
		}
	}
}

func (s *suite) hostileStdoutNolog(t *testing.T) {
	m := s.mustLoad(t, "stdout", LoadSpec{Capabilities: []string{abi.CapConfig}})
	s.flood(t, m)
	s.answersOK(t, m, "w")
	// Without the log capability nothing the guest writes is logged.
	output := func() int {
		return s.countLogs("stdout", func(l Log) bool { return l.Stream != "" })
	}
	never(t, "output of a module without the log capability logged", func() bool { return output() > 0 })
	if n := output(); n > 0 {
		t.Logf("%d lines of output logged", n)
	}
}

func (s *suite) hostileStdoutLog(t *testing.T) {
	m := s.mustLoad(t, "stdout", LoadSpec{})
	s.flood(t, m)
	s.answersOK(t, m, "w")
	// The guest wrote 2 MiB in two lines. A host logs them in pieces of at
	// most abi.MaxLogSize, and may drop what is past its log rate (stderr
	// comes second, so it may be dropped whole).
	streams := func() map[string]int {
		n := map[string]int{}
		for _, l := range s.h.Logs("stdout") {
			n[l.Stream]++
		}
		return n
	}
	eventually(t, "lines of the guest's stdout in the log", func() bool { return streams()["stdout"] > 0 })
	for _, l := range s.h.Logs("stdout") {
		if len(l.Message) > abi.MaxLogSize {
			t.Errorf("a %s line of %d bytes was logged; the limit is %d", l.Stream, len(l.Message), abi.MaxLogSize)
		}
	}
	t.Logf("lines logged: %v", streams())
}

// ticks counts the "tick" lines a guest logged on _tick.
func (s *suite) ticks(module string) int {
	return s.countLogs(module, func(l Log) bool { return l.Stream == "" && l.Message == "tick" })
}

func (s *suite) hostileTimers(t *testing.T) {
	m := s.mustLoad(t, "timers", LoadSpec{Capabilities: allCaps})
	status := uint32Reply(t, s.mustInvoke(t, m, "t", "fast", nil))
	t.Logf("a 1 ms timer: status %d", status)
	if status == uint32(abi.StatusOK) {
		// Accepted, the timer runs at the host's minimum interval.
		before, start := s.ticks("timers"), time.Now()
		never(t, fmt.Sprintf("more than one tick per %v from a timer of 1 ms", minTimerInterval), func() bool {
			return s.ticks("timers")-before > int(time.Since(start)/minTimerInterval)+2
		})
		t.Logf("%d ticks in %v", s.ticks("timers")-before, time.Since(start).Round(time.Millisecond))
	}
	// 10,000 timers, each replacing the last.
	ok := uint32Reply(t, s.mustInvoke(t, m, "t", "many", nil))
	t.Logf("10,000 timers asked for: %d accepted", ok)
	if st := uint32Reply(t, s.mustInvoke(t, m, "t", "stop", nil)); st != uint32(abi.StatusOK) {
		t.Errorf("cancelling the timer answered status %d", st)
	}
	// One tick may have been on its way.
	after := s.ticks("timers") + 1
	never(t, "a tick after the timer was cancelled", func() bool { return s.ticks("timers") > after })
	s.answersOK(t, m, "t")
}

func (s *suite) hostileTimerfail(t *testing.T) {
	// The settings make _settings set a timer every 10 ms and trap.
	err := s.mustFailLoad(t, "timerfail", LoadSpec{Config: []byte(`{"t":"fail"}`), Capabilities: allCaps})
	s.wantKind(t, err, KindTrap)
	wantMention(t, err, abi.PortSettings)
	// The module loaded again sets no timer: no timer of the failed load
	// may tick into it.
	m := s.mustLoad(t, "timerfail", LoadSpec{Capabilities: allCaps})
	never(t, "a tick of the timer set by a load that failed", func() bool { return s.ticks("timerfail") > 0 })
	s.answersOK(t, m, "t")
}

// floodCounts is the reply of the flood guest.
type floodCounts struct {
	OK, Unavailable, Other int
	Reason                 string
}

func (s *suite) hostileFlood(t *testing.T) {
	s.mustLoad(t, "slow", LoadSpec{CallTimeout: 5 * time.Second})
	flood := s.mustLoad(t, "flood", LoadSpec{Capabilities: allCaps})
	caller := s.mustLoad(t, "hostcalls", LoadSpec{Capabilities: allCaps})
	// Each accepted send holds its place until the slow module's
	// CallTimeout (or, queued, its QueueTimeout) ends it, seconds after the
	// flood: long enough for another module to send while none has left.
	const sends = 10000
	r := s.mustInvoke(t, flood, "flooder", "flood", fmt.Appendf(nil, "slow/sleeper/in %d 60000", sends))
	var c floodCounts
	if err := json.Unmarshal(r.Payload, &c); err != nil {
		t.Fatalf("flood answered %q: %v", r.Payload, err)
	}
	t.Logf("%d sends: %d accepted, %d unavailable, %d other", sends, c.OK, c.Unavailable, c.Other)
	if c.Other > 0 {
		t.Errorf("%d sends answered neither ok nor unavailable, the first %s", c.Other, c.Reason)
	}
	if c.Unavailable == 0 {
		t.Errorf("all %d sends of one module to a slow one were accepted: the sends in flight per module must be bounded", sends)
	}
	// While those are in flight, another module sends.
	mark := "flood-" + strconv.FormatUint(rand.Uint64(), 36)
	s.mustInvoke(t, caller, "caller", "send", []byte("hostcalls/caller/note "+mark))
	eventually(t, "delivery of another module's send during the flood", func() bool {
		return s.countLogs("hostcalls", func(l Log) bool { return l.Message == "note "+mark }) > 0
	})
}

func (s *suite) hostileSysports(t *testing.T) {
	m := s.mustLoad(t, "hostcalls", LoadSpec{Config: []byte(hostcallsConfig), Capabilities: allCaps})
	for _, port := range []string{abi.PortSettings, abi.PortTick} {
		t.Run("invoke-"+port, func(t *testing.T) {
			_ = s.mustFail(t, s.echo, "echo", port, []byte(`{}`), KindDenied)
		})
	}
	for _, tc := range []struct{ via, to string }{
		{"send", "echo/echo/" + abi.PortSettings},
		{"call", "echo/echo/" + abi.PortTick},
		{"send", "hostcalls/caller/" + abi.PortSettings},
		{"call", "hostcalls/caller/" + abi.PortSettings},
	} {
		t.Run(tc.via+"-"+strings.ReplaceAll(tc.to, "/", "-"), func(t *testing.T) {
			err := s.mustFail(t, m, "caller", tc.via, []byte(tc.to+` {"greeting":"pwned"}`), KindHandler)
			wantMention(t, err, "status 3")
		})
	}
	wantJSON(t, "settings", s.mustInvoke(t, m, "caller", "settings", nil).Payload, `{"greeting":"hi"}`)
}

func (s *suite) hostileGarbage(t *testing.T) {
	m := s.mustLoad(t, "garbage", LoadSpec{MemoryPages: hostilePages})
	const calls = 1000 // 62.5 MiB of garbage through a 16 MiB memory
	payload := []byte("garbage")
	for i := range calls {
		r, err := invoke(t, m, "churn", "in", payload)
		if err != nil {
			t.Fatalf("call %d: %v (kind %q)", i, err, s.h.Kind(err))
		}
		if string(r.Payload) != string(payload) {
			t.Fatalf("call %d answered %q", i, r.Payload)
		}
	}
}

// never checks that cond does not hold for neverWindow.
func never(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(neverWindow)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if cond() {
			t.Errorf("%s", what)
			return
		}
		select {
		case <-t.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// neverWindow is how long never watches: thirty of the intervals of the
// timers it watches for.
const neverWindow = 300 * time.Millisecond
