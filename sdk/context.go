package sdk

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tinyhost/tinyhost/abi"
)

// Context is what a handler may do while it handles one message. It is
// valid only during that call: the SDK reuses it for the next message, so a
// handler must not keep it or use it from a goroutine that outlives the call.
type Context struct {
	in   *instance
	comp *component
	port *port
}

var errOutsideCall = errors.New("sdk: Context used outside its handler call")

// Component returns the name of the component handling the message.
func (c *Context) Component() string {
	if c.comp == nil {
		return ""
	}
	return c.comp.spec.Name
}

// Port returns the port the message arrived on.
func (c *Context) Port() string {
	if c.port == nil {
		return ""
	}
	return c.port.name
}

// Metadata returns the value of the message's metadata entry key (e.g.
// "traceparent"), or "" when there is none.
func (c *Context) Metadata(key string) string {
	if c.comp == nil {
		return ""
	}
	v, _ := c.in.r.lookup(key)
	return string(v)
}

// Settings returns the component's settings: the payload of the last
// PortSettings message it accepted (a handler of PortSettings that returns an
// error rejects them and the previous ones stay), or {} before any arrived.
// Inside the handler of PortSettings it returns the settings being delivered.
// The bytes are shared: do not modify them.
func (c *Context) Settings() []byte {
	if c.comp == nil {
		return nil
	}
	return c.in.settingsOf(c.comp)
}

// Config returns the whole module configuration, a JSON object, through the
// host's config import.
func (c *Context) Config() ([]byte, error) {
	if c.comp == nil {
		return nil, errOutsideCall
	}
	s, res := c.in.call(fnConfig, nil)
	if s != abi.StatusOK {
		return nil, &Error{Status: s, Message: "config: " + string(res)}
	}
	return append([]byte(nil), res...), nil
}

// Emit sends payload out of the component's output port. The host delivers
// it to the input ports wired to that output; the message carries the
// metadata (trace context, hop count) of the message being handled. The
// payload is copied.
func (c *Context) Emit(port string, payload []byte) error {
	if c.comp == nil {
		return errOutsideCall
	}
	names := c.comp.output(port)
	if names == nil {
		return &Error{Status: abi.StatusNotFound, Message: fmt.Sprintf("emit: component %q has no output port %q", c.comp.spec.Name, port)}
	}
	s, res := c.in.call(fnEmit, c.in.message(names, payload))
	if s != abi.StatusOK {
		return hostError(s, "emit", port, res)
	}
	return nil
}

// Send delivers payload to address ("module/component/port") without
// waiting for the reply.
func (c *Context) Send(address string, payload []byte) error {
	_, _, err := c.send(fnSend, "send", address, payload)
	return err
}

// Call delivers payload to address ("module/component/port") and waits for
// the reply, within the deadline of the message being handled.
func (c *Context) Call(address string, payload []byte) ([]byte, error) {
	res, owned, err := c.send(fnCall, "call", address, payload)
	if err != nil || owned {
		// A long reply is in a buffer of its own already.
		return res, err
	}
	return append([]byte(nil), res...), nil
}

// send makes the host call fn, the message carrying the entries extra
// after the handled message's; a reply in a buffer of its own is owned.
func (c *Context) send(fn hostFunc, op, address string, payload []byte, extra ...abi.KV) (reply []byte, owned bool, err error) {
	if c.comp == nil {
		return nil, false, errOutsideCall
	}
	module, rest, ok1 := strings.Cut(address, "/")
	component, port, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 || module == "" || component == "" || port == "" || strings.IndexByte(port, '/') >= 0 {
		return nil, false, &Error{Status: abi.StatusBadRequest, Message: fmt.Sprintf("%s: address %q: want module/component/port", op, address)}
	}
	names := c.in.names(module, component, port)
	var msg []byte
	if len(extra) == 0 {
		msg = c.in.message(names, payload)
	} else {
		msg = c.in.messageWith(names, payload, extra)
	}
	s, res, owned := c.in.callOwn(fn, msg, fn == fnCall)
	if s != abi.StatusOK {
		return nil, false, hostError(s, op, address, res)
	}
	return res, owned, nil
}

// SetTimer makes the host deliver a message on PortTick to this component
// every interval; 0 cancels it. The ABI carries 1ms to 24h, and SetTimer
// refuses anything else itself; the host refuses an interval below its
// limit MinTimerInterval, 10ms by default, with an error naming the bound.
// Settings usually decide the interval, so a component calls SetTimer from
// its PortSettings handler, which every new instance receives.
func (c *Context) SetTimer(interval time.Duration) error {
	if c.comp == nil {
		return errOutsideCall
	}
	if interval < 0 || (interval > 0 && interval < time.Millisecond) || interval.Milliseconds() > abi.MaxTimerInterval {
		return fmt.Errorf("timer: interval %v: want 0 (cancel) or 1ms to 24h", interval)
	}
	c.in.msg = abi.AppendTimer(c.in.msg[:0], c.comp.spec.Name, uint64(interval.Milliseconds()))
	s, res := c.in.call(fnTimer, c.in.msg)
	if s != abi.StatusOK {
		return hostError(s, "timer", c.comp.spec.Name, res)
	}
	return nil
}

func hostError(s abi.Status, op, target string, reason []byte) error {
	msg := op + " " + target + ": " + s.String()
	if len(reason) > 0 {
		msg += ": " + string(reason)
	}
	return &Error{Status: s, Message: msg}
}

// Debug logs msg with key-value pairs, formatted as "msg k=v k=v". The host
// adds the module and the component. A line below the level the host
// records is dropped before it is formatted.
func (c *Context) Debug(msg string, keyvals ...any) { c.log(abi.LogDebug, msg, keyvals) }

// Info logs at info level; see Debug.
func (c *Context) Info(msg string, keyvals ...any) { c.log(abi.LogInfo, msg, keyvals) }

// Warn logs at warn level; see Debug.
func (c *Context) Warn(msg string, keyvals ...any) { c.log(abi.LogWarn, msg, keyvals) }

// Error logs at error level; see Debug.
func (c *Context) Error(msg string, keyvals ...any) { c.log(abi.LogError, msg, keyvals) }

func (c *Context) log(level abi.LogLevel, msg string, keyvals []any) {
	if c.in == nil || level < minLogLevel {
		return
	}
	b := appendLog(c.in.line[:0], msg, keyvals)
	if len(b) > abi.MaxLogSize {
		b = b[:abi.MaxLogSize]
	}
	c.in.line = b
	c.in.hostlog(level, b)
}

// appendLog formats "msg k=v k=v" in the manner of logfmt: a value is
// quoted when it is empty or has spaces, quotes, '=' or control characters.
func appendLog(b []byte, msg string, keyvals []any) []byte {
	b = append(b, msg...)
	for i := 0; i < len(keyvals); i += 2 {
		b = append(b, ' ')
		if i+1 == len(keyvals) {
			b = append(b, "!BADKEY="...)
			b = appendValue(b, keyvals[i])
			break
		}
		if k, ok := keyvals[i].(string); ok {
			b = append(b, k...)
		} else {
			b = appendValue(b, keyvals[i])
		}
		b = append(b, '=')
		b = appendValue(b, keyvals[i+1])
	}
	return b
}

func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return appendText(b, v)
	case []byte:
		return appendText(b, string(v))
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	case uint:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10)
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, v)
	case nil:
		return append(b, "<nil>"...)
	case error:
		return appendText(b, v.Error())
	case fmt.Stringer:
		return appendText(b, v.String())
	default:
		return appendText(b, fmt.Sprint(v))
	}
}

func appendText(b []byte, s string) []byte {
	if s == "" {
		return append(b, `""`...)
	}
	for _, r := range s {
		if r <= ' ' || r == '=' || r == '"' || r == utf8.RuneError || r == 0x7f {
			return strconv.AppendQuote(b, s)
		}
	}
	return append(b, s...)
}
