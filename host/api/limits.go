package api

import "time"

// Limits bound what one module may use on a host: the host's defaults
// (host.Options.Limits), a load's (host.LoadOptions.Limits, a LoadModule
// header's limits) and what a host reports of a loaded module. A zero
// field means "the default", and so does a nil MinInstances: the host's
// Options.Limits for a module, the values below for the host. The host
// fills and checks them (against its host.Maxima too); the koanf tags are
// the keys of the daemon's configuration.
type Limits struct {
	// MemoryPages is the most memory one instance may have, in 64 KiB
	// pages (at most 65536): its linear memory and its tables, which may
	// take up to 1/16 of it (see "Failures and limits" in package host).
	// A module that declares a larger initial memory fails to load;
	// growing past it fails the guest's memory.grow.
	// Default 4096 (256 MiB).
	MemoryPages uint32 `koanf:"memory-pages"`

	// CallTimeout is how long one call into the guest may run. Default 10s.
	// An instance's start (start function, _initialize) gets at least 5s.
	CallTimeout time.Duration `koanf:"call-timeout"`

	// MaxMessageSize is the largest encoded request, response or message
	// sent by the guest, in bytes (at most abi.MaxMessageSize). Default
	// 4 MiB.
	MaxMessageSize int `koanf:"max-message-bytes"`

	// MinInstances is how many instances are kept warm: nil is the
	// default, 1. A warm instance answers a call at once, and holds its
	// linear memory (a Go guest's few MiB and up) while idle. 0 keeps
	// none: the instance made to load the module, and every later one,
	// closes after IdleTimeout idle, and the next call first starts one,
	// which costs an instantiation (and _initialize) on that call.
	MinInstances *int `koanf:"min-instances"`

	// MaxInstances bound the instances of one module version, and so the
	// number of concurrent calls into it. Default 2 × GOMAXPROCS.
	MaxInstances int `koanf:"max-instances"`

	// QueueTimeout is how long a call waits for a free instance before it
	// fails with ErrBusy. Default 5s.
	QueueTimeout time.Duration `koanf:"queue-timeout"`

	// IdleTimeout is how long an instance beyond MinInstances may stay
	// idle before it is closed, so that a burst of calls does not hold its
	// instances' memory for ever. Default 1m.
	IdleTimeout time.Duration `koanf:"idle-timeout"`

	// RecyclePages bounds the linear memory an instance may keep between
	// calls, in 64 KiB pages. Linear memory never shrinks (a Go guest's
	// heap grows to its peak and stays there), so an instance whose memory
	// has grown past RecyclePages after a call is closed once that call
	// has returned its reply, and replaced in the background when the pool
	// needs one; no call fails. An instance already past it when created
	// is recycled only once it grows further. host.PoolStats.Recycled counts
	// them. At or above MemoryPages, nothing is recycled; below what the
	// module's instances need in steady state, nearly every call costs an
	// instantiation. Default MemoryPages / 2.
	RecyclePages uint32 `koanf:"recycle-pages"`

	// LogLinesPerSecond and LogBytesPerSecond bound the module's guest log
	// lines: those of the log import and of stdout and stderr together,
	// over all its instances. Bursts of one second's worth pass; past
	// that, lines are dropped, and the host logs how many once a second.
	// Defaults 200 lines and 256 KiB; LogBytesPerSecond is at least
	// abi.MaxLogSize, one full line.
	LogLinesPerSecond int `koanf:"log-lines-per-second"`
	LogBytesPerSecond int `koanf:"log-bytes-per-second"`

	// MinTimerInterval is the shortest interval the timer import accepts;
	// a shorter one is refused with abi.StatusBadRequest. Default 10ms.
	MinTimerInterval time.Duration `koanf:"min-timer-interval"`

	// MaxTimers is how many timers (one per component at most) the module
	// may have running; a further one is refused with
	// abi.StatusUnavailable. Default 64.
	MaxTimers int `koanf:"max-timers"`

	// MaxSends is how many messages the module may have in flight that no
	// one waits for (send, and emits on wired ports), from the moment they
	// are accepted until the target has handled them (or, for a module on
	// another host, until that host has accepted them). A further send
	// fails at once with abi.StatusUnavailable, so that one module cannot
	// take every slot of the host's own bound (1024) from the others.
	// Default 128.
	MaxSends int `koanf:"max-sends"`

	// Outbound HTTP (abi.ImportHTTP), for a module granted "http:" hosts.
	//
	// HTTPTimeout bounds one request, redirects and the reading of the
	// body included, within what is left of the call's deadline; past it
	// the guest gets abi.StatusTimeout. Default 10s.
	HTTPTimeout time.Duration `koanf:"http-timeout"`
	// MaxHTTPRequestSize and MaxHTTPResponseSize bound the body of a
	// request and of a response, in bytes; past them the guest gets
	// abi.StatusTooLarge (a response is refused as soon as it is known to
	// be larger, before the rest of it is read). Defaults 1 MiB and
	// 10 MiB.
	MaxHTTPRequestSize  int `koanf:"http-max-request-bytes"`
	MaxHTTPResponseSize int `koanf:"http-max-response-bytes"`
	// MaxHTTPHeaders and MaxHTTPHeaderBytes bound the headers of a
	// request and of a response: their number (at most
	// abi.MaxHTTPHeaders) and their bytes (at most abi.MaxHTTPHeaders
	// times abi.MaxMetadataLen, 2 MiB, what the ABI carries); a header is
	// at most abi.MaxMetadataLen bytes. Defaults 64 and 64 KiB.
	MaxHTTPHeaders     int `koanf:"http-max-headers"`
	MaxHTTPHeaderBytes int `koanf:"http-max-header-bytes"`
	// MaxHTTPRedirects is how many redirects one request follows, each
	// checked against the grants, at most abi.MaxHTTPRedirects; a
	// negative value follows none. Default 5.
	MaxHTTPRedirects int `koanf:"http-max-redirects"`
	// MaxHTTPRequests is how many requests the module may have in flight
	// at once, over all its instances; a further one waits for a place
	// within its deadline. Default 16.
	MaxHTTPRequests int `koanf:"http-max-requests"`
	// MaxEmits is how many messages one call may emit on unwired ports,
	// which the host keeps for the call's reply (Response.Emitted). Each
	// also counts its encoded size and 256 bytes, what the host
	// holds for it besides, against MaxMessageSize. An emit past either
	// bound is refused with abi.StatusTooLarge, and the call then fails
	// with KindTooLarge: its reply could not hold what it emitted. Default
	// 1024.
	MaxEmits int `koanf:"max-emits"`

	// Key-value state (abi.ImportKV), for a module granted "kv".
	//
	// MaxKVKeySize and MaxKVValueSize bound one key (at most
	// abi.MaxKVKeyLen) and one value (at most abi.MaxKVValueSize), in
	// bytes; past them the guest gets abi.StatusTooLarge. Defaults 256
	// bytes and 64 KiB.
	MaxKVKeySize   int `koanf:"kv-max-key-bytes"`
	MaxKVValueSize int `koanf:"kv-max-value-bytes"`
	// MaxKVBytes bounds the module's whole bucket, keys, values and the
	// store's own bytes per entry, shared by its replicas on every host; a
	// write past it gets abi.StatusQuota. Default 16 MiB.
	MaxKVBytes int64 `koanf:"kv-max-bytes"`
	// MaxKVListKeys is the most keys one listing returns (at most
	// abi.MaxKVListKeys); the answer says when more match. Default 1000.
	MaxKVListKeys int `koanf:"kv-max-list-keys"`
}
