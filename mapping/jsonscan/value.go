package jsonscan

import "errors"

// The defects the scan functions report. Their text is fixed and safe to
// show to clients.
var (
	ErrSyntax  = errors.New("invalid JSON")
	ErrTooDeep = errors.New("JSON nested too deeply")
	ErrBadUTF8 = errors.New("invalid UTF-8 in a JSON string")
	// ErrSurrogate is StrictString's: a \u escape of a UTF-16 surrogate
	// that is not the first half of a pair followed by its second half.
	ErrSurrogate = errors.New("invalid UTF-16 surrogate escape in a JSON string")
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first byte at or after b[i] that is
// not JSON whitespace, or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// Value checks the JSON value starting at b[i] (no leading space), in
// which arrays and objects nest at most maxDepth deep, and returns the
// index just past it.
func Value(b []byte, i, maxDepth int) (int, error) {
	if i >= len(b) {
		return i, ErrSyntax
	}
	switch c := b[i]; {
	case c == '{':
		return object(b, i, maxDepth-1)
	case c == '[':
		return array(b, i, maxDepth-1)
	case c == '"':
		end, _, err := str(b, i, false)
		return end, err
	case c == '-' || (c >= '0' && c <= '9'):
		return Number(b, i)
	case c == 't' || c == 'f' || c == 'n':
		return Literal(b, i)
	}
	return i, ErrSyntax
}

// Literal checks the literal that b[i] begins: true, false or null.
func Literal(b []byte, i int) (int, error) {
	var lit string
	switch b[i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	case 'n':
		lit = "null"
	default:
		return i, ErrSyntax
	}
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, ErrSyntax
	}
	return i + len(lit), nil
}

// object checks the object at b[i], in which arrays and objects may nest
// left levels more.
func object(b []byte, i, left int) (int, error) {
	if left < 0 {
		return i, ErrTooDeep
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, ErrSyntax
		}
		var err error
		if i, _, err = str(b, i, false); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, ErrSyntax
		}
		i = SkipSpace(b, i+1)
		if i, err = Value(b, i, left); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, ErrSyntax
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, ErrSyntax
		}
	}
}

// array checks the array at b[i], in which arrays and objects may nest
// left levels more.
func array(b []byte, i, left int) (int, error) {
	if left < 0 {
		return i, ErrTooDeep
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = Value(b, i, left); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, ErrSyntax
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, ErrSyntax
		}
	}
}

// Number checks the RFC 8259 number starting at b[i],
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and returns the index
// just past the longest one there; ErrSyntax where the grammar wants a
// digit that is not there.
func Number(b []byte, i int) (int, error) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return i, ErrSyntax
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return j, ErrSyntax
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
			return j, ErrSyntax
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

// Skip returns the index just past the JSON value at b[i], which Value
// has already accepted. It only finds the end, so that splitting a
// checked text does not check it a second time.
func Skip(b []byte, i int) int {
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
