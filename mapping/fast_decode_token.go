package mapping

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// The tokens of the fast decoder: literals, strings (unescaped in place),
// bytes (base64), numbers, floats and integers, each read as protojson
// reads it, or the fast path gives up.

// literal reads the literal s at d.i, if it is there.
func (d *fastDecoder) literal(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// plainString reads a JSON string without escapes and returns its bytes.
func (d *fastDecoder) plainString() ([]byte, bool) {
	start := d.i + 1
	if start > len(d.b) {
		return nil, false
	}
	k, nonASCII := jsonscan.Plain(d.b[start:])
	j := start + k
	if j >= len(d.b) || d.b[j] != '"' {
		return nil, false
	}
	s := d.b[start:j]
	if nonASCII && !utf8.Valid(s) {
		return nil, false
	}
	d.i = j + 1
	return s, true
}

// strEnd finds the end of the JSON string whose opening quote is at d.i:
// it returns the index of the closing quote and whether there are escapes
// in between. Control characters and invalid UTF-8 fail, as in protojson.
func (d *fastDecoder) strEnd() (int, bool, bool) {
	b := d.b
	j := d.i + 1
	escapes, nonASCII := false, false
	for j < len(b) {
		k, na := jsonscan.Plain(b[j:])
		j += k
		nonASCII = nonASCII || na
		if j >= len(b) {
			break
		}
		c := b[j]
		if c == '"' {
			// Escapes are ASCII (unescape refuses any other), so the raw
			// string is valid UTF-8 if and only if the unescaped one is.
			if nonASCII && !utf8.Valid(b[d.i+1:j]) {
				return 0, false, d.fail(reasonValue)
			}
			return j, escapes, true
		}
		if c < 0x20 {
			return 0, false, d.fail(reasonValue)
		}
		escapes = true // c == '\\'
		j += 2
	}
	return 0, false, d.fail(reasonSyntax)
}

// appendString appends the content of the JSON string at d.i to dst,
// unescaped as protojson does (surrogate pairs included), without its
// quotes.
func (d *fastDecoder) appendString(dst []byte) ([]byte, bool) {
	end, escapes, ok := d.strEnd()
	if !ok {
		return dst, false
	}
	raw := d.b[d.i+1 : end]
	d.i = end + 1
	if !escapes {
		return append(dst, raw...), true
	}
	return d.unescape(dst, raw)
}

// appendStringField appends the JSON string at d.i to dst as a
// length-delimited value (its tag is already written).
func (d *fastDecoder) appendStringField(dst []byte) ([]byte, bool) {
	end, escapes, ok := d.strEnd()
	if !ok {
		return dst, false
	}
	raw := d.b[d.i+1 : end]
	d.i = end + 1
	if !escapes {
		return protowire.AppendBytes(dst, raw), true
	}
	// The unescaped string is no longer than raw: reserve raw's length
	// prefix, unescape in place, then fix the prefix.
	mark := len(dst)
	room := protowire.SizeVarint(uint64(len(raw)))
	dst = append(dst, make([]byte, room)...)
	if dst, ok = d.unescape(dst, raw); !ok {
		return dst, false
	}
	return finishLength(dst, mark, room, len(dst)-mark-room), true
}

// appendBytesField appends the base64 JSON string at d.i to dst, decoded,
// as a length-delimited value (its tag is already written). It decodes as
// protojson does: standard or URL alphabet, with or without padding.
func (d *fastDecoder) appendBytesField(dst []byte) ([]byte, bool) {
	end, escapes, ok := d.strEnd()
	if !ok {
		return dst, false
	}
	s := d.b[d.i+1 : end]
	d.i = end + 1
	arenaMark := len(d.arena)
	if escapes { // "\/" as PHP writes it, for one
		if d.arena, ok = d.unescape(d.arena, s); !ok {
			return dst, false
		}
		s = d.arena[arenaMark:]
	}
	enc := base64Encodings[0]
	if bytes.IndexByte(s, '-') >= 0 || bytes.IndexByte(s, '_') >= 0 {
		enc = base64Encodings[1]
	}
	if len(s)%4 != 0 {
		enc = base64Encodings[2+boolInt(enc == base64Encodings[1])]
	}
	maxLen := enc.DecodedLen(len(s))
	mark := len(dst)
	room := protowire.SizeVarint(uint64(maxLen))
	dst = slices.Grow(dst, room+maxLen)[:mark+room+maxLen]
	n, err := enc.Decode(dst[mark+room:], s)
	d.arena = d.arena[:arenaMark]
	if err != nil {
		return dst[:mark], d.fail(reasonValue)
	}
	return finishLength(dst, mark, room, n), true
}

// base64Encodings are the alphabets protojson reads bytes in: standard,
// URL, and both without padding.
var base64Encodings = [4]*base64.Encoding{
	base64.StdEncoding, base64.URLEncoding,
	base64.StdEncoding.WithPadding(base64.NoPadding), base64.URLEncoding.WithPadding(base64.NoPadding),
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unescape appends the JSON string content raw (between its quotes,
// already checked by strEnd) to dst, decoding its escapes as protojson
// does.
func (d *fastDecoder) unescape(dst, raw []byte) ([]byte, bool) {
	for j := 0; j < len(raw); {
		k := bytes.IndexByte(raw[j:], '\\')
		if k < 0 {
			return append(dst, raw[j:]...), true
		}
		dst = append(dst, raw[j:j+k]...)
		j += k
		if j+1 >= len(raw) {
			return dst, d.fail(reasonSyntax)
		}
		switch e := raw[j+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw, j+2)
			if !ok {
				return dst, d.fail(reasonValue)
			}
			j += 6
			if r >= 0xD800 && r < 0xE000 { // a surrogate: a pair, or protojson refuses it
				lo, ok := rune(0), false
				if r < 0xDC00 && j+1 < len(raw) && raw[j] == '\\' && raw[j+1] == 'u' {
					lo, ok = hex4(raw, j+2)
				}
				if !ok || lo < 0xDC00 || lo >= 0xE000 {
					return dst, d.fail(reasonValue)
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				j += 6
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, d.fail(reasonValue)
		}
		j += 2
	}
	return dst, true
}

// hex4 reads four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return rune(v), err == nil
}

// number reads a JSON number token, bare or inside a string, and returns
// its text. Only the RFC 8259 grammar is accepted.
func (d *fastDecoder) number() ([]byte, bool) {
	quoted := d.peek() == '"'
	if quoted {
		d.i++
	}
	start := d.i
	j := start
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	switch {
	case j < len(d.b) && d.b[j] == '0':
		j++
	case j < len(d.b) && d.b[j] >= '1' && d.b[j] <= '9':
		for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
			j++
		}
	default:
		return nil, false
	}
	if j < len(d.b) && d.b[j] == '.' {
		k := j + 1
		for k < len(d.b) && d.b[k] >= '0' && d.b[k] <= '9' {
			k++
		}
		if k == j+1 {
			return nil, false
		}
		j = k
	}
	if j < len(d.b) && (d.b[j] == 'e' || d.b[j] == 'E') {
		k := j + 1
		if k < len(d.b) && (d.b[k] == '+' || d.b[k] == '-') {
			k++
		}
		m := k
		for m < len(d.b) && d.b[m] >= '0' && d.b[m] <= '9' {
			m++
		}
		if m == k {
			return nil, false
		}
		j = m
	}
	tok := d.b[start:j]
	if quoted {
		if j >= len(d.b) || d.b[j] != '"' {
			return nil, false
		}
		j++
	} else if j < len(d.b) && !isDelimiter(d.b[j]) {
		return nil, false // 1x, 01
	}
	d.i = j
	return tok, true
}

// isDelimiter reports whether c may follow a bare JSON number.
func isDelimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// float reads a float or double: a JSON number, a number in a string, or
// "NaN", "Infinity" and "-Infinity", as protojson reads them. Values out
// of range take the general path.
func (d *fastDecoder) float(is32 bool) (float64, bool) {
	if d.peek() == '"' {
		switch {
		case d.literal(`"NaN"`):
			return math.NaN(), true
		case d.literal(`"Infinity"`):
			return math.Inf(1), true
		case d.literal(`"-Infinity"`):
			return math.Inf(-1), true
		}
	} else if c := d.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, d.fail(reasonValue)
	}
	tok, ok := d.number()
	if !ok {
		return 0, d.fail(reasonNumber)
	}
	bits := 64
	if is32 {
		bits = 32
	}
	v, err := strconv.ParseFloat(string(tok), bits)
	if err != nil || math.IsInf(v, 0) {
		return 0, d.fail(reasonNumber)
	}
	return v, true
}

// integer reads an integer of kind k, bare or as a string, and appends its
// wire form. Fractions and exponents take the general path.
func (d *fastDecoder) integer(k protoreflect.Kind, dst []byte) ([]byte, bool, bool) {
	if c := d.peek(); c != '"' && c != '-' && (c < '0' || c > '9') {
		return dst, false, d.fail(reasonValue)
	}
	tok, ok := d.number()
	if !ok {
		return dst, false, d.fail(reasonNumber)
	}
	for _, c := range tok {
		if c == '.' || c == 'e' || c == 'E' {
			return dst, false, d.fail(reasonNumber)
		}
	}
	s := string(tok)
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return dst, false, d.fail(reasonNumber)
		}
		switch k {
		case protoreflect.Int32Kind:
			dst = protowire.AppendVarint(dst, uint64(v))
		case protoreflect.Sint32Kind:
			dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(v))
		default:
			dst = protowire.AppendFixed32(dst, uint32(int32(v)))
		}
		return dst, v == 0, true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return dst, false, d.fail(reasonNumber)
		}
		switch k {
		case protoreflect.Int64Kind:
			dst = protowire.AppendVarint(dst, uint64(v))
		case protoreflect.Sint64Kind:
			dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(v))
		default:
			dst = protowire.AppendFixed64(dst, uint64(v))
		}
		return dst, v == 0, true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return dst, false, d.fail(reasonNumber)
		}
		if k == protoreflect.Uint32Kind {
			dst = protowire.AppendVarint(dst, v)
		} else {
			dst = protowire.AppendFixed32(dst, uint32(v))
		}
		return dst, v == 0, true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return dst, false, d.fail(reasonNumber)
		}
		if k == protoreflect.Uint64Kind {
			dst = protowire.AppendVarint(dst, v)
		} else {
			dst = protowire.AppendFixed64(dst, v)
		}
		return dst, v == 0, true
	}
	return dst, false, d.fail(reasonValue)
}
