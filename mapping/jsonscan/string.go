package jsonscan

import (
	"encoding/binary"
	"unicode/utf8"
)

// String checks the JSON string starting at the quote b[i] and returns
// the index just past its closing quote and whether it holds escapes. A
// \u escape of a lone UTF-16 surrogate is taken, as RFC 8259's grammar
// and encoding/json take it. On ErrSyntax the index is that of the byte
// at fault: a control character, the backslash of an escape JSON has not
// (or of a \u without four hex digits), or len(b) where the text ends
// within the string; on ErrBadUTF8, the start of the run that holds the
// bytes that are not UTF-8.
func String(b []byte, i int) (end int, escaped bool, err error) { return str(b, i, false) }

// StrictString is String that also refuses, with ErrSurrogate at the
// backslash of its escape, a \u escape of a UTF-16 surrogate that is not
// the first half of a pair followed by its second, as protojson refuses
// it.
func StrictString(b []byte, i int) (end int, escaped bool, err error) { return str(b, i, true) }

// str is String, or StrictString when strict. Runs of plain characters
// are skipped 8 bytes at a time (Plain), and checked for UTF-8 only when
// they hold a byte that is not ASCII.
func str(b []byte, i int, strict bool) (end int, escaped bool, err error) {
	i++
	for i < len(b) {
		n, high := Plain(b[i:])
		if high && !utf8.Valid(b[i:i+n]) {
			return i, escaped, ErrBadUTF8
		}
		i += n
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, ErrSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, escaped, ErrSyntax
				}
				if strict && isSurrogate(hex4(b[i+2:])) {
					if !isPair(b, i) {
						return i, escaped, ErrSurrogate
					}
					i += 6
				}
				i += 6
			default:
				return i, escaped, ErrSyntax
			}
		default: // a control character
			return i, escaped, ErrSyntax
		}
	}
	return i, escaped, ErrSyntax
}

// isEscapeU tells whether b[i:] begins with \u and four hex digits.
func isEscapeU(b []byte, i int) bool {
	return len(b)-i >= 6 && b[i] == '\\' && b[i+1] == 'u' && isHex(b[i+2]) && isHex(b[i+3]) && isHex(b[i+4]) && isHex(b[i+5])
}

func isSurrogate(r int) bool { return r >= 0xD800 && r < 0xE000 }

// isPair tells whether b[i:] begins with the \u escapes of the two halves
// of a UTF-16 surrogate pair, in order.
func isPair(b []byte, i int) bool {
	hi := hex4(b[i+2:])
	if hi >= 0xDC00 || !isEscapeU(b, i+6) {
		return false
	}
	lo := hex4(b[i+8:])
	return lo >= 0xDC00 && lo < 0xE000
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// Unquote decodes the JSON string literal s (quotes included), which
// String has already accepted. A \u escape of a lone surrogate becomes
// U+FFFD.
func Unquote(s []byte) string {
	s = s[1 : len(s)-1]
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch s[i] {
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
			r := rune(hex4(s[i+1 : i+5]))
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if r2 := rune(hex4(s[i+3 : i+7])); r2 >= 0xDC00 && r2 < 0xE000 {
					r = (r-0xD800)<<10 | (r2 - 0xDC00) + 0x10000
					i += 6
				}
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, s[i])
		}
	}
	return string(out)
}

// hex4 is the value of the four hex digits s begins with.
func hex4(s []byte) int {
	n := 0
	for _, c := range s[:4] {
		n <<= 4
		switch {
		case c >= '0' && c <= '9':
			n |= int(c - '0')
		case c >= 'a' && c <= 'f':
			n |= int(c-'a') + 10
		default:
			n |= int(c-'A') + 10
		}
	}
	return n
}

// skipString returns the index just past the valid string at b[i],
// skipping runs without '"' or '\\' 8 bytes at a time.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		n, _ := Plain(b[i:])
		if i += n; i >= len(b) {
			return i
		}
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// Plain returns the index of the first byte of s that a JSON string
// cannot hold as it is: '"', '\\' or a control character (below 0x20), or
// len(s); and whether a byte before it is not ASCII (so that UTF-8 needs
// checking). It tests 8 bytes at a time: the classic "has a byte less
// than n" test, exact for whether there is one.
func Plain(s []byte) (int, bool) {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	var high uint64
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		q := x ^ (lo * '"')
		b := x ^ (lo * '\\')
		if ((x-lo*0x20)&^x|(q-lo)&^q|(b-lo)&^b)&hi != 0 {
			break
		}
		high |= x
	}
	var hb byte
	for ; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' {
			break
		}
		hb |= c
	}
	return i, high&hi != 0 || hb >= 0x80
}
