package wire

import (
	"errors"
	"unicode/utf8"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// maxDepth bounds how deeply arrays and objects may nest in a request body.
// Deeper input is refused as a parse error before anything runs.
const maxDepth = 1000

// Parse failures. Their text is fixed and safe to show to clients.
var (
	errSyntax   = errors.New("invalid JSON")
	errTooDeep  = errors.New("JSON nested too deeply")
	errBadUTF8  = errors.New("invalid UTF-8 in a JSON string")
	errTrailing = errors.New("data after the JSON value")
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func SkipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// ScanValue checks the JSON value starting at b[i] (no leading space) and
// returns the index just past it.
func ScanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errSyntax
	}
	switch c := b[i]; {
	case c == '{':
		return scanObject(b, i, depth+1)
	case c == '[':
		return scanArray(b, i, depth+1)
	case c == '"':
		end, _, err := ScanString(b, i)
		return end, err
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return i, errSyntax
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, errSyntax
	}
	return i + len(lit), nil
}

func scanObject(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, errTooDeep
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, errSyntax
		}
		var err error
		if i, _, err = ScanString(b, i); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, errSyntax
		}
		i = SkipSpace(b, i+1)
		if i, err = ScanValue(b, i, depth); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, errSyntax
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, errSyntax
		}
	}
}

func scanArray(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, errTooDeep
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = ScanValue(b, i, depth); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, errSyntax
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, errSyntax
		}
	}
}

// ScanString checks the string starting at the quote b[i] and returns the
// index past the closing quote and whether it contains escapes. Runs of
// plain characters are skipped 8 bytes at a time (mapping.ScanPlain), and
// checked for UTF-8 only when they hold a byte that is not ASCII.
func ScanString(b []byte, i int) (end int, escaped bool, err error) {
	i++
	for i < len(b) {
		n, high := mapping.ScanPlain(b[i:])
		if high && !utf8.Valid(b[i:i+n]) {
			return i, escaped, errBadUTF8
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
				return i, escaped, errSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, escaped, errSyntax
				}
				i += 6
			default:
				return i, escaped, errSyntax
			}
		default: // a control character
			return i, escaped, errSyntax
		}
	}
	return i, escaped, errSyntax
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// scanNumber checks an RFC 8259 number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return i, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return j, errSyntax
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return j, errSyntax
		}
		i = j
	}
	return i, nil
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// Unquote decodes the JSON string literal s (quotes included), which
// ScanString has already accepted.
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

// SkipValue returns the index just past the JSON value at b[i], which
// ScanValue has already accepted. It only finds the end, so that splitting
// a validated envelope does not validate it a second time.
func SkipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) { // a number or a literal
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// skipString returns the index just past the valid string at b[i],
// skipping runs without '"' or '\\' 8 bytes at a time.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		n, _ := mapping.ScanPlain(b[i:])
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
