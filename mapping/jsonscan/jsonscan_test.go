package jsonscan

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxDepth is bridge/wire's bound, which the fuzzers hold Value to.
const maxDepth = 1000

// TestSkipMatchesValue: on accepted JSON, Skip finds the end Value finds.
func TestSkipMatchesValue(t *testing.T) {
	for _, v := range []string{
		`"a"`, `"a\"b\\"`, `"\\"`, `12`, `-1.5e+3`, `true`, `null`, `{}`, `[]`,
		`{"a":[1,"]}",{"b":"\\\""}],"c":null}`, `[[["x"]],{}]`, `{"k":"}"}`,
	} {
		for _, tail := range []string{"", ",1", "}", "]", " ", "\n"} {
			b := []byte(v + tail)
			want, err := Value(b, 0, maxDepth)
			if err != nil {
				t.Fatalf("%s: %v", v, err)
			}
			if got := Skip(b, 0); got != want {
				t.Errorf("Skip(%q) = %d, want %d", b, got, want)
			}
		}
	}
}

// FuzzSkip: on every whole JSON value Value accepts, Skip finds the same
// end.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x\"y"]}`, `"s"`, `1.5`, `[true,null]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		want, err := Value(b, 0, maxDepth)
		if err != nil || want != len(b) {
			return // only whole values reach Skip: the body check refuses the rest
		}
		if got := Skip(b, 0); got != want {
			t.Fatalf("Skip(%q) = %d, want %d", b, got, want)
		}
	})
}

// FuzzValue holds the scan to encoding/json on valid UTF-8 input shorter
// than the nesting bound: Value accepts a whole input exactly when
// json.Valid does.
func FuzzValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x\"y"]}`, `"s"`, `1.5`, `[true,null]`, `"\ud83d\ude80 ünïcode"`, `{"a":"b\u0000"}`, "\"a\x01\"", `01`, `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(b) >= 2*maxDepth || !utf8.Valid(b) {
			return
		}
		end, err := Value(b, 0, maxDepth)
		got := err == nil && SkipSpace(b, end) == len(b)
		if want := json.Valid(b); got != want && !isSpace(b[0]) {
			t.Fatalf("Value(%q): whole %v, json.Valid %v (err %v, end %d)", b, got, want, err, end)
		}
	})
}

// TestDepth: Value takes maxDepth levels of nesting and refuses one more.
func TestDepth(t *testing.T) {
	for _, open := range []string{"[", `{"a":`} {
		closing := map[string]string{"[": "]", `{"a":`: "}"}[open]
		for _, tt := range []struct {
			depth int
			err   error
		}{{maxDepth, nil}, {maxDepth + 1, ErrTooDeep}} {
			b := []byte(strings.Repeat(open, tt.depth) + "1" + strings.Repeat(closing, tt.depth))
			if _, err := Value(b, 0, maxDepth); err != tt.err {
				t.Errorf("%s nested %d deep: got %v, want %v", open, tt.depth, err, tt.err)
			}
		}
	}
}

// TestStringDefects: String and StrictString say what is wrong and
// where, as their documentation promises (mapping's account of params
// names the defect from it).
func TestStringDefects(t *testing.T) {
	for _, tt := range []struct {
		name, in  string
		at        int   // the index returned
		err       error // String's
		strictErr error // StrictString's, where it differs
	}{
		{"plain", `"abc"`, 5, nil, nil},
		{"escapes", `"a\n\u00e9\/"`, 13, nil, nil},
		{"pair", `"\ud83d\ude80"`, 14, nil, nil},
		{"unterminated", `"abc`, 4, ErrSyntax, nil},
		{"unterminated after a backslash", `"abc\`, 4, ErrSyntax, nil},
		{"unterminated after an escape", `"a\n`, 4, ErrSyntax, nil},
		{"control character", "\"ab\x01c\"", 3, ErrSyntax, nil},
		{"bad escape", `"ab\x"`, 3, ErrSyntax, nil},
		{"short \\u", `"ab\u12"`, 3, ErrSyntax, nil},
		{"bad \\u", `"ab\u12g4"`, 3, ErrSyntax, nil},
		{"bad UTF-8", "\"ab\xffc\"", 1, ErrBadUTF8, nil},
		{"bad UTF-8 after an escape", "\"a\\nb\xff\"", 4, ErrBadUTF8, nil},
		{"lone high surrogate", `"a\ud800b"`, 10, nil, ErrSurrogate},
		{"lone low surrogate", `"a\udc00b"`, 10, nil, ErrSurrogate},
		{"high then not low", `"a\ud800\u0041"`, 15, nil, ErrSurrogate},
		{"high then a bad escape", `"a\ud800\uzzzz"`, 8, ErrSyntax, ErrSurrogate},
		{"high at the end", `"a\ud800`, 8, ErrSyntax, ErrSurrogate},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.in)
			end, _, err := String(b, 0)
			if end != tt.at || err != tt.err {
				t.Errorf("String(%q) = %d, %v; want %d, %v", b, end, err, tt.at, tt.err)
			}
			want, wantAt := tt.err, tt.at
			if tt.strictErr != nil {
				want, wantAt = tt.strictErr, 2 // the backslash of the first escape
			}
			if end, _, err := StrictString(b, 0); end != wantAt || err != want {
				t.Errorf("StrictString(%q) = %d, %v; want %d, %v", b, end, err, wantAt, want)
			}
		})
	}
}

// TestUnquote: a string String accepted decodes as encoding/json decodes
// it.
func TestUnquote(t *testing.T) {
	for _, s := range []string{`"a"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d"`, `"\ud83d\ude80"`, `"\ud800x"`, `"é"`} {
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if got := Unquote([]byte(s)); got != want {
			t.Errorf("Unquote(%s) = %q, want %q", s, got, want)
		}
	}
}

// TestNumber: the longest RFC 8259 number, or ErrSyntax where a digit is
// wanted.
func TestNumber(t *testing.T) {
	for _, tt := range []struct {
		in  string
		end int
		ok  bool
	}{
		{"0", 1, true}, {"-0", 2, true}, {"01", 1, true}, {"12.5e-3,", 7, true}, {"1E9", 3, true},
		{"", 0, false}, {"-", 1, false}, {"1.", 2, false}, {"1.e5", 2, false}, {"1e", 2, false}, {"1e+", 3, false}, {"+1", 0, false}, {".5", 0, false},
	} {
		end, err := Number([]byte(tt.in), 0)
		if end != tt.end || (err == nil) != tt.ok {
			t.Errorf("Number(%q) = %d, %v; want %d, ok %v", tt.in, end, err, tt.end, tt.ok)
		}
	}
}

// TestLiteral: true, false and null, and nothing else.
func TestLiteral(t *testing.T) {
	for _, tt := range []struct {
		in  string
		end int
		err error
	}{{"true", 4, nil}, {"false,", 5, nil}, {"null]", 4, nil}, {"nul", 0, ErrSyntax}, {"tru e", 0, ErrSyntax}, {"x", 0, ErrSyntax}} {
		if end, err := Literal([]byte(tt.in), 0); end != tt.end || !errors.Is(err, tt.err) {
			t.Errorf("Literal(%q) = %d, %v; want %d, %v", tt.in, end, err, tt.end, tt.err)
		}
	}
}

func TestPlain(t *testing.T) {
	naive := func(s []byte) (int, bool) {
		high := false
		for i, c := range s {
			if c < 0x20 || c == '"' || c == '\\' {
				return i, high
			}
			high = high || c >= 0x80
		}
		return len(s), high
	}
	r := rand.New(rand.NewPCG(11, 12))
	for range 20000 {
		s := make([]byte, r.IntN(40))
		for i := range s {
			s[i] = []byte{'a', 0x1f, 0x20, '"', '\\', 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xff, 0x00, 0xa2, 0xdc}[r.IntN(14)]
			if r.IntN(3) > 0 {
				s[i] = 'x'
			}
		}
		got, gotHigh := Plain(s)
		if want, wantHigh := naive(s); got != want || gotHigh != wantHigh {
			t.Fatalf("%q: got %d %v, want %d %v", s, got, gotHigh, want, wantHigh)
		}
	}
}
