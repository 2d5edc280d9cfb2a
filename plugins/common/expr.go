package main

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// A condition is a boolean expression over a JSON message:
//
//	$.age >= 18 && ($.country == "NL" || exists($.consent))
//
//	cond    = or
//	or      = and { "||" and }
//	and     = not { "&&" not }
//	not     = "!" not | compare
//	compare = operand [ ("==" | "!=" | "<" | "<=" | ">" | ">=") operand ]
//	operand = path | string | number | "true" | "false" | "null"
//	        | "exists(" path ")" | "(" cond ")"
//
// A path that names nothing is null; exists tells it apart from a null
// value. == and != compare JSON values (numbers by value, arrays and
// objects deeply). <, <=, >, >= compare two numbers or two strings and are
// false for anything else. An operand alone, or either side of && and ||,
// holds only when it is the value true. "!" negates the comparison or group
// that follows it: !$.a == 1 means !($.a == 1).
type cond interface {
	eval(doc any) any
}

type (
	literal struct{ v any }
	ref     struct{ p path }
	exists  struct{ p path }
	not     struct{ x cond }
	and     struct{ l, r cond }
	or      struct{ l, r cond }
	compare struct {
		op   string
		l, r cond
	}
)

func (c literal) eval(any) any { return c.v }
func (c ref) eval(doc any) any {
	v, _ := c.p.lookup(doc)
	return v
}
func (c exists) eval(doc any) any {
	_, ok := c.p.lookup(doc)
	return ok
}
func (c not) eval(doc any) any { return !truth(c.x.eval(doc)) }
func (c and) eval(doc any) any { return truth(c.l.eval(doc)) && truth(c.r.eval(doc)) }
func (c or) eval(doc any) any  { return truth(c.l.eval(doc)) || truth(c.r.eval(doc)) }

func (c compare) eval(doc any) any {
	l, r := c.l.eval(doc), c.r.eval(doc)
	switch c.op {
	case "==":
		return reflect.DeepEqual(l, r)
	case "!=":
		return !reflect.DeepEqual(l, r)
	}
	var n int
	switch l := l.(type) {
	case float64:
		r, ok := r.(float64)
		if !ok {
			return false
		}
		switch {
		case l < r:
			n = -1
		case l > r:
			n = 1
		}
	case string:
		r, ok := r.(string)
		if !ok {
			return false
		}
		n = strings.Compare(l, r)
	default:
		return false
	}
	switch c.op {
	case "<":
		return n < 0
	case "<=":
		return n <= 0
	case ">":
		return n > 0
	default: // ">="
		return n >= 0
	}
}

func truth(v any) bool {
	b, ok := v.(bool)
	return ok && b
}

// holds evaluates the condition against a decoded JSON document.
func holds(c cond, doc any) bool { return truth(c.eval(doc)) }

// parseCond parses a condition.
func parseCond(src string) (cond, error) {
	p := &parser{src: src}
	p.next()
	c := p.or()
	if p.err == nil && p.tok != tokEOF {
		p.fail("unexpected %s", p.describe())
	}
	if p.err != nil {
		return nil, p.err
	}
	return c, nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokOp          // == != < <= > >= && || ! ( )
	tokPath
	tokString
	tokNumber
	tokIdent
)

type parser struct {
	src  string
	pos  int // where the current token starts
	end  int // where it ends
	tok  tokKind
	text string
	val  any // string or float64 literal; path for tokPath
	err  error
}

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("condition %q: at %d: %s", p.src, p.pos+1, fmt.Sprintf(format, args...))
	}
	p.tok = tokEOF
}

func (p *parser) describe() string {
	if p.tok == tokEOF {
		return "end"
	}
	return strconv.Quote(p.text)
}

// next reads the next token.
func (p *parser) next() {
	if p.err != nil {
		return
	}
	i := p.end
	for i < len(p.src) && (p.src[i] == ' ' || p.src[i] == '\t' || p.src[i] == '\n' || p.src[i] == '\r') {
		i++
	}
	p.pos = i
	if i == len(p.src) {
		p.tok, p.text, p.end = tokEOF, "", i
		return
	}
	s := p.src[i:]
	for _, op := range []string{"==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")"} {
		if strings.HasPrefix(s, op) {
			p.tok, p.text, p.end = tokOp, op, i+len(op)
			return
		}
	}
	c := s[0]
	switch {
	case c == '$':
		pa, n, err := scanPath(s)
		if err != nil {
			p.fail("%v", err)
			return
		}
		p.tok, p.text, p.val, p.end = tokPath, s[:n], pa, i+n
	case c == '"':
		j := 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			p.fail("unterminated string")
			return
		}
		v, err := strconv.Unquote(s[:j+1])
		if err != nil {
			p.fail("bad string %s", s[:j+1])
			return
		}
		p.tok, p.text, p.val, p.end = tokString, s[:j+1], v, i+j+1
	case c == '\'':
		j := strings.IndexByte(s[1:], '\'')
		if j < 0 {
			p.fail("unterminated string")
			return
		}
		p.tok, p.text, p.val, p.end = tokString, s[:j+2], s[1:j+1], i+j+2
	case c == '-' || c >= '0' && c <= '9':
		j := 1
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
			(s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E')) {
			j++
		}
		f, err := strconv.ParseFloat(s[:j], 64)
		if err != nil {
			p.fail("bad number %q", s[:j])
			return
		}
		p.tok, p.text, p.val, p.end = tokNumber, s[:j], f, i+j
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		j := 1
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
			j++
		}
		p.tok, p.text, p.end = tokIdent, s[:j], i+j
	default:
		p.pos = i
		p.fail("unexpected %q", c)
	}
}

func (p *parser) is(op string) bool { return p.tok == tokOp && p.text == op }

func (p *parser) or() cond {
	l := p.and()
	for p.is("||") {
		p.next()
		l = or{l, p.and()}
	}
	return l
}

func (p *parser) and() cond {
	l := p.not()
	for p.is("&&") {
		p.next()
		l = and{l, p.not()}
	}
	return l
}

func (p *parser) not() cond {
	if p.is("!") {
		p.next()
		return not{p.not()}
	}
	return p.compare()
}

func (p *parser) compare() cond {
	l := p.operand()
	if p.tok == tokOp {
		switch op := p.text; op {
		case "==", "!=", "<", "<=", ">", ">=":
			p.next()
			return compare{op, l, p.operand()}
		}
	}
	return l
}

func (p *parser) operand() cond {
	switch p.tok {
	case tokPath:
		c := ref{p.val.(path)}
		p.next()
		return c
	case tokString, tokNumber:
		c := literal{p.val}
		p.next()
		return c
	case tokIdent:
		switch p.text {
		case "true", "false":
			c := literal{p.text == "true"}
			p.next()
			return c
		case "null":
			p.next()
			return literal{nil}
		case "exists":
			p.next()
			if !p.is("(") {
				p.fail("want ( after exists")
				return nil
			}
			p.next()
			if p.tok != tokPath {
				p.fail("exists takes a path such as $.a, not %s", p.describe())
				return nil
			}
			c := exists{p.val.(path)}
			p.next()
			if !p.is(")") {
				p.fail("want ) after exists(%s", c.p)
				return nil
			}
			p.next()
			return c
		}
		p.fail("unknown name %q; use a path such as $.%s, a quoted string, true, false, null or exists($.x)", p.text, p.text)
		return nil
	case tokOp:
		if p.is("(") {
			p.next()
			c := p.or()
			if !p.is(")") {
				p.fail("want ), got %s", p.describe())
				return nil
			}
			p.next()
			return c
		}
	}
	p.fail("want a value, got %s", p.describe())
	return nil
}
