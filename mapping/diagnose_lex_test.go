package mapping

import (
	"testing"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The walker's lexing is jsonscan's. These tests hold it to the walker's
// own lexer as it was before (refStr, refNumberLen, kept here as the
// reference), so that every reason a client reads stays the same, byte
// for byte.

// refStr reads the JSON string at the read position (which is '"') and
// returns its value, or a reason it is malformed.
func (w *walker) refStr() (string, string) {
	b := w.b
	i := w.i + 1
	var out []byte
	for {
		if i >= len(b) {
			return "", "invalid JSON: unterminated string"
		}
		switch c := b[i]; {
		case c == '"':
			w.i = i + 1
			return string(out), ""
		case c < ' ':
			return "", "invalid JSON: control character in string"
		case c == '\\':
			if i+1 >= len(b) {
				return "", "invalid JSON: unterminated string"
			}
			e := b[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(b, i)
				if !ok {
					return "", "invalid JSON: bad \\u escape in string"
				}
				i += 4
				if utf16.IsSurrogate(r) {
					r2, ok := rune(-1), false
					if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						r2, ok = hex4(b, i+2)
					}
					r = utf16.DecodeRune(r, r2)
					if !ok || r == unicode.ReplacementChar {
						return "", "invalid UTF-16 surrogate escape in string"
					}
					i += 6
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", "invalid JSON: bad escape in string"
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return "", "invalid UTF-8 in string"
			}
			out = append(out, b[i:i+n]...)
			i += n
		}
	}
}

// refNumberLen returns the length of the JSON number at the start of s,
// or 0.
func refNumberLen(s []byte) int {
	digits := func(i int) int {
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = digits(i)
	default:
		return 0
	}
	if i < len(s) && s[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0
		}
		i = j
	}
	return i
}

// checkLexer compares the walker's lexing of b with the reference's.
func checkLexer(t *testing.T, b []byte) {
	t.Helper()
	if len(b) > 0 && b[0] == '"' {
		w, ref := &walker{b: b}, &walker{b: b}
		got, gotReason := w.str()
		want, wantReason := ref.refStr()
		if got != want || gotReason != wantReason || (wantReason == "" && w.i != ref.i) {
			t.Fatalf("str(%q) = %q, %q, at %d; want %q, %q, at %d", b, got, gotReason, w.i, want, wantReason, ref.i)
		}
	}
	// A bare number at the start of b: where it ends, or that it is none.
	if c := b[0]; c == '-' || '0' <= c && c <= '9' {
		w := &walker{b: b}
		p, want := w.skip(nil, 0), refNumberLen(b)
		if (p == nil) != (want > 0) || p == nil && w.i != want {
			t.Fatalf("the number at the start of %q: got %v, ending at %d; want ok %v, ending at %d", b, p, w.i, want > 0, want)
		}
	}
}

func TestLexerMatchesReference(t *testing.T) {
	for _, s := range lexerSeeds {
		checkLexer(t, []byte(s))
	}
}

// FuzzLexer holds the walker's lexing, jsonscan's, to the reference.
func FuzzLexer(f *testing.F) {
	for _, s := range lexerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 {
			checkLexer(t, b)
		}
	})
}

var lexerSeeds = []string{
	`"abc"`, `"a\n\u00e9\/"`, `"\ud83d\ude80"`, `"abc`, `"abc\`, `"a\n`, "\"ab\x01c\"", `"ab\x"`,
	`"ab\u12"`, `"ab\u12g4"`, "\"ab\xffc\"", "\"a\\nb\xff\"", `"a\ud800b"`, `"a\udc00b"`,
	`"a\ud800\u0041"`, `"a\ud800\uzzzz"`, `"a\ud800`, `"a\ud800\n\u0001"`, "\"\xe2\x82\"", `"\uD83D\uDE80x"`,
	`0`, `-0`, `01`, `12.5e-3,`, `1E9`, `-`, `1.`, `1.e5`, `1e`, `1e+`, `-x`, `123456789012345678901234567890`,
}
