package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCond(t *testing.T) {
	doc := `{"age":30,"name":"Ada","tags":["a","b"],"nested":{"ok":true,"n":null},"zero":0,"list":[1,2],"odd key":"x"}`
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cond string
		want bool
	}{
		{"$.age >= 18", true},
		{"$.age < 18", false},
		{"$.age == 30", true},
		{"$.age == 30.0", true},
		{"$.age != 30", false},
		{"$.age > 29.5 && $.age <= 30", true},
		{`$.name == "Ada"`, true},
		{`$.name == 'Ada'`, true},
		{`$.name > "Ab"`, true},
		{`$.name < 5`, false},
		{`$.age < "5"`, false},
		{"$.tags[1] == 'b'", true},
		{"$.tags[2] == null", true},
		{"$.nested.ok", true},
		{"$.nested.ok == true", true},
		{"$.nested.n == null", true},
		{"$.missing == null", true},
		{"exists($.nested.n)", true},
		{"exists($.missing)", false},
		{"!exists($.missing)", true},
		{"$.zero", false},
		{"$.name", false},
		{"!$.age == 30", false},
		{"!($.age == 30) || $.name == 'Ada'", true},
		{"$.age < 18 || $.age > 65 || $.name == 'Ada'", true},
		{"($.age < 18 || $.age > 25) && $.nested.ok", true},
		{"$.age < 18 || $.age > 25 && !$.nested.ok", false},
		{`$["odd key"] == "x"`, true},
		{"$.list[0] == 1 && $.list[1] == 2", true},
		{"-1 < $.zero", true},
		{"1e1 == 10", true},
		{"true", true},
		{"false || null", false},
		{"$ == $", true},
	}
	for _, tc := range tests {
		t.Run(tc.cond, func(t *testing.T) {
			c, err := parseCond(tc.cond)
			if err != nil {
				t.Fatal(err)
			}
			if got := holds(c, v); got != tc.want {
				t.Fatalf("%s = %v, want %v", tc.cond, got, tc.want)
			}
		})
	}
}

func TestCondErrors(t *testing.T) {
	tests := []struct{ cond, want string }{
		{"", "at 1: want a value, got end"},
		{"$.age >=", "at 9: want a value, got end"},
		{"$.age >= 18 &&", "want a value, got end"},
		{"age > 1", `unknown name "age"; use a path such as $.age`},
		{"$.a == 1 )", `unexpected ")"`},
		{"($.a == 1", "want ), got end"},
		{"$.a = 1", `at 5: unexpected '='`},
		{`$.a == "x`, "unterminated string"},
		{"$. == 1", "want a name after '.'"},
		{"$.a[x] == 1", `want [index] or ["key"]`},
		{"exists(1)", "exists takes a path"},
		{"exists $.a", "want ( after exists"},
		{"$.a == 1 == 2", `unexpected "=="`},
		{"1.2.3 == 1", `bad number "1.2.3"`},
		{`$.tags == ["a"]`, "at 11: unexpected '['"},
	}
	for _, tc := range tests {
		t.Run(tc.cond, func(t *testing.T) {
			_, err := parseCond(tc.cond)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseCond(%q) = %v, want an error containing %q", tc.cond, err, tc.want)
			}
		})
	}
}

func FuzzParseCond(f *testing.F) {
	for _, s := range []string{"$.a >= 1 && !exists($.b)", `($["x"] == 'y') || $.c[0] != null`, "-1e3 < $"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCond(s)
		if err == nil {
			holds(c, map[string]any{"a": 1.0, "c": []any{"x"}})
		}
	})
}
