package jsonlite_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tinyhost/tinyhost/sdk/jsonlite"
)

// decode builds the same Go value as json.Unmarshal into an any, through
// Object and Array: maps, slices, strings, float64, bool and nil.
func decode(v jsonlite.Value) (any, error) {
	switch v.Kind() {
	case jsonlite.ObjectKind:
		m := map[string]any{}
		obj := v.Object()
		for obj.Next() {
			x, err := decode(obj.Value())
			if err != nil {
				return nil, err
			}
			m[string(obj.Key())] = x
		}
		return m, obj.Err()
	case jsonlite.ArrayKind:
		s := []any{}
		arr := v.Array()
		for arr.Next() {
			x, err := decode(arr.Value())
			if err != nil {
				return nil, err
			}
			s = append(s, x)
		}
		return s, arr.Err()
	case jsonlite.String:
		return v.Text()
	case jsonlite.Number:
		return v.Float()
	case jsonlite.Bool:
		return v.Bool()
	case jsonlite.Null:
		return nil, nil
	}
	return nil, errors.New("invalid value")
}

// decodeDoc decodes a whole document: the top level through NewObject or
// NewArray, so that their own checks of the input's end are exercised.
func decodeDoc(data []byte) (any, error) {
	trimmed := strings.TrimLeft(string(data), " \t\r\n")
	switch {
	case strings.HasPrefix(trimmed, "{"):
		m := map[string]any{}
		obj := jsonlite.NewObject(data)
		for obj.Next() {
			x, err := decode(obj.Value())
			if err != nil {
				return nil, err
			}
			m[string(obj.Key())] = x
		}
		return m, obj.Err()
	case strings.HasPrefix(trimmed, "["):
		s := []any{}
		arr := jsonlite.NewArray(data)
		for arr.Next() {
			x, err := decode(arr.Value())
			if err != nil {
				return nil, err
			}
			s = append(s, x)
		}
		return s, arr.Err()
	}
	if !jsonlite.Valid(data) {
		return nil, errors.New("invalid")
	}
	return decode(jsonlite.Value(strings.Trim(string(data), " \t\r\n")))
}

var seeds = []string{
	`{"name":"Ada"}`, `{}`, `[]`, ` { "a" : [1, 2.5e3, -0.1, true, false, null, {"b":"c"}] } `,
	`{"esc":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\udc00"}`, `"lone"`, `12`, `null`,
	`{"a":1,}`, `[1,]`, `{"a" 1}`, `{"a":01}`, `[1.]`, `[1e]`, `{"a":"\x"}`, `{"a":"\u12"}`,
	`{"a":1}x`, `{"a":1`, `[`, `{`, `"abc`, "{\"a\":\"\x01\"}", `{"dup":1,"dup":2}`, "\"\xff\xfe\"",
	`[-]`, `[-0]`, `[0.0e+0]`, `tru`, `nul`, `{"\u0041":1}`, `[[[[[]]]]]`, `{"a":{}}`, ``, `   `,
}

func FuzzDecode(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := json.Valid(data)
		if got := jsonlite.Valid(data); got != valid {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, got, valid)
		}
		got, err := decodeDoc(data)
		var want any
		wantErr := json.Unmarshal(data, &want)
		switch {
		case wantErr != nil && err == nil:
			t.Fatalf("decoding %q: no error, encoding/json says %v", data, wantErr)
		case wantErr != nil:
			return // both refuse it: malformed, or a number out of range
		case err != nil:
			t.Fatalf("decoding %q: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoding %q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "Ada", `"quoted" \ back`, "<a&b>", "\u2028\u2029", "\x00\x1f\x7f", "\xff", "é😀", "tab\there"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := jsonlite.AppendString([]byte("x"), s)
		if string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json: %s", s, got[1:], want)
		}
		text, err := jsonlite.Value(got[1:]).Text()
		if err != nil {
			t.Fatal(err)
		}
		var back string
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		if text != back {
			t.Fatalf("Text of %s = %q, encoding/json: %q", got[1:], text, back)
		}
	})
}

func TestObject(t *testing.T) {
	type member struct{ key, value string }
	tests := []struct {
		name    string
		in      string
		members []member
		err     string
	}{
		{"members", ` {"name" : "Ada", "n":[1, {"x":null}] } `, []member{{"name", `"Ada"`}, {"n", `[1, {"x":null}]`}}, ""},
		{"empty", `{}`, nil, ""},
		{"null", `null`, nil, ""},
		{"escaped key", `{"n\u0061me":1}`, []member{{"name", "1"}}, ""},
		{"repeated key", `{"a":1,"a":2}`, []member{{"a", "1"}, {"a", "2"}}, ""},
		{"not an object", `[1]`, nil, "want an object, have an array"},
		{"trailing data", `{"a":1} {}`, []member{{"a", "1"}}, "invalid character '{' after top-level value at offset 8"},
		{"trailing comma", `{"a":1,}`, []member{{"a", "1"}}, "looking for beginning of object key string at offset 7"},
		{"bad value", `{"a":tru}`, nil, "invalid literal, want true at offset 5"},
		{"truncated", `{"a":1`, nil, "unexpected end of JSON input at offset 6"},
		{"empty input", ``, nil, "unexpected end of JSON input at offset 0"},
		{"control character", "{\"a\":\"\n\"}", nil, `invalid character '\n' in string literal at offset 6`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []member
			obj := jsonlite.NewObject([]byte(tc.in))
			for obj.Next() {
				got = append(got, member{string(obj.Key()), string(obj.Value())})
			}
			if !reflect.DeepEqual(got, tc.members) {
				t.Errorf("members %q, want %q", got, tc.members)
			}
			err := obj.Err()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
			if obj.Next() {
				t.Error("Next after the end returned true")
			}
		})
	}
}

func TestValue(t *testing.T) {
	v := func(s string) jsonlite.Value { return jsonlite.Value(s) }
	if s, err := v(`"a\"b\u00e9"`).Text(); err != nil || s != `a"bé` {
		t.Errorf(`Text = %q, %v`, s, err)
	}
	if s, err := v(`null`).Text(); err != nil || s != "" {
		t.Errorf(`Text of null = %q, %v`, s, err)
	}
	if _, err := v(`12`).Text(); err == nil || err.Error() != "jsonlite: want a string, have a number" {
		t.Errorf(`Text of a number: %v`, err)
	}
	if n, err := v(`-9223372036854775808`).Int(); err != nil || n != -9223372036854775808 {
		t.Errorf("Int = %d, %v", n, err)
	}
	for _, bad := range []string{`9223372036854775808`, `1.5`, `1e3`} {
		if _, err := v(bad).Int(); err == nil {
			t.Errorf("Int(%s): no error", bad)
		}
	}
	if _, err := v(`"1"`).Int(); err == nil || !strings.Contains(err.Error(), "want a number, have a string") {
		t.Errorf(`Int of a string: %v`, err)
	}
	if f, err := v(`2.5e-1`).Float(); err != nil || f != 0.25 {
		t.Errorf("Float = %v, %v", f, err)
	}
	if b, err := v(`true`).Bool(); err != nil || !b {
		t.Errorf("Bool = %v, %v", b, err)
	}
	if _, err := v(`1`).Bool(); err == nil {
		t.Error("Bool of a number: no error")
	}
	for _, bad := range []string{`"`, `"abc`, `"a\u12"`, `"a" x`, "\"\x01\"", `"\q"`} {
		if _, err := v(bad).Text(); err == nil {
			t.Errorf("Text(%s): no error", bad)
		}
	}
	if _, err := v(`tru`).Bool(); err == nil {
		t.Error("Bool(tru): no error")
	}
	if !v(`null`).IsNull() || v(`0`).IsNull() {
		t.Error("IsNull")
	}
	arr := v(`{"a":1}`).Array()
	if arr.Next() || arr.Err() == nil || !strings.Contains(arr.Err().Error(), "want an array, have an object") {
		t.Errorf("Array of an object: %v", arr.Err())
	}
}

func TestDepth(t *testing.T) {
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	if jsonlite.Valid([]byte(deep)) {
		t.Error("10001 nested arrays are valid")
	}
	ok := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	if !jsonlite.Valid([]byte(ok)) {
		t.Error("10000 nested arrays are invalid")
	}
}

// TestNoAllocs: reading an object whose strings need no unescaping
// allocates only the strings Text returns.
func TestNoAllocs(t *testing.T) {
	data := []byte(`{"name":"Ada","n":12,"ok":true,"skip":{"deep":[1,2,3]}}`)
	allocs := testing.AllocsPerRun(100, func() {
		obj := jsonlite.NewObject(data)
		for obj.Next() {
			switch string(obj.Key()) {
			case "n":
				_, _ = obj.Value().Int()
			case "ok":
				_, _ = obj.Value().Bool()
			}
		}
		if obj.Err() != nil {
			t.Fatal(obj.Err())
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations", allocs)
	}
}

// FuzzValue: a Value made by hand from any bytes gets an answer or an
// error from every method, never a panic, and Text agrees with
// encoding/json on string literals.
func FuzzValue(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := jsonlite.Value(data)
		_, _ = v.Int()
		_, _ = v.Float()
		_, _ = v.Bool()
		for obj := v.Object(); obj.Next(); {
		}
		for arr := v.Array(); arr.Next(); {
		}
		text, err := v.Text()
		if v.Kind() != jsonlite.String {
			return
		}
		var want string
		wantErr := json.Unmarshal(data, &want)
		if wantErr == nil && len(data) > 0 && data[len(data)-1] == '"' {
			if err != nil || text != want {
				t.Fatalf("Text(%q) = %q, %v; encoding/json: %q", data, text, err, want)
			}
		} else if err == nil {
			t.Fatalf("Text(%q) = %q; encoding/json: %v", data, text, wantErr)
		}
	})
}
