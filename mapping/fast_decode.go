package mapping

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fastDecoder turns a JSON object into protobuf wire bytes following a
// plan. Any method returning ok == false means "take the general path".
type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (d *fastDecoder) peek() byte {
	d.space()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// appendRequest appends the wire form of the JSON object b (params) to dst.
func (pl *plan) appendRequest(dst, b []byte) ([]byte, bool) {
	d := fastDecoder{b: b}
	if d.peek() != '{' {
		return dst, false
	}
	dst, ok := d.object(pl, dst, 0)
	d.space()
	return dst, ok && d.i == len(d.b)
}

// object reads the JSON object at d.i as a message of pl.
func (d *fastDecoder) object(pl *plan, dst []byte, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		return dst, false
	}
	d.i++ // '{'
	var seen, oneofs bitset
	if d.peek() == '}' {
		d.i++
		return dst, true
	}
	for {
		if d.peek() != '"' {
			return dst, false
		}
		key, ok := d.plainString()
		if !ok {
			return dst, false
		}
		f := pl.byName[string(key)]
		if f == nil || seen.testAndSet(f.index) {
			return dst, false
		}
		if f.oneof >= 0 && oneofs.testAndSet(f.oneof) {
			return dst, false
		}
		if d.peek() != ':' {
			return dst, false
		}
		d.i++
		if dst, ok = d.fieldValue(f, dst, depth); !ok {
			return dst, false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return dst, true
		default:
			return dst, false
		}
	}
}

func (d *fastDecoder) fieldValue(f *field, dst []byte, depth int) ([]byte, bool) {
	c := d.peek()
	if c == 'n' { // null has its own protojson rules
		return dst, false
	}
	if !f.list {
		return d.singular(f, dst, depth, !f.presence)
	}
	if c != '[' {
		return dst, false
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return dst, true
	}
	for {
		if d.peek() == 'n' {
			return dst, false
		}
		var ok bool
		if dst, ok = d.singular(f, dst, depth, false); !ok {
			return dst, false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return dst, true
		default:
			return dst, false
		}
	}
}

// singular appends one value of f with its tag. When skipZero is set (a
// field without presence) a zero value is left out, as proto.Marshal does.
func (d *fastDecoder) singular(f *field, dst []byte, depth int, skipZero bool) ([]byte, bool) {
	start := len(dst)
	dst = protowire.AppendTag(dst, f.num, f.wireType)
	var zero, ok bool
	switch f.kind {
	case protoreflect.MessageKind:
		if d.peek() != '{' {
			return dst, false
		}
		mark := len(dst)
		dst = append(dst, 0) // one length byte, widened below if needed
		if dst, ok = d.object(f.msg, dst, depth+1); !ok {
			return dst, false
		}
		return backpatchLength(dst, mark), true
	case protoreflect.StringKind:
		var s []byte
		if s, ok = d.stringValue(); !ok {
			return dst, false
		}
		zero = len(s) == 0
		dst = protowire.AppendBytes(dst, s)
	case protoreflect.BytesKind:
		var s []byte
		if s, ok = d.stringValue(); !ok {
			return dst, false
		}
		var raw []byte
		if raw, ok = decodeBase64(s); !ok {
			return dst, false
		}
		zero = len(raw) == 0
		dst = protowire.AppendBytes(dst, raw)
	case protoreflect.BoolKind:
		switch {
		case d.literal("true"):
			dst = append(dst, 1)
		case d.literal("false"):
			zero = true
			dst = append(dst, 0)
		default:
			return dst, false
		}
	case protoreflect.EnumKind:
		var name []byte
		if d.peek() != '"' {
			return dst, false
		}
		if name, ok = d.plainString(); !ok {
			return dst, false
		}
		n, known := f.enum.byName[string(name)]
		if !known {
			return dst, false
		}
		zero = n == 0
		dst = protowire.AppendVarint(dst, uint64(int64(n)))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		var v float64
		if v, ok = d.float(f.kind == protoreflect.FloatKind); !ok {
			return dst, false
		}
		zero = v == 0 && !math.Signbit(v)
		if f.kind == protoreflect.FloatKind {
			dst = protowire.AppendFixed32(dst, math.Float32bits(float32(v)))
		} else {
			dst = protowire.AppendFixed64(dst, math.Float64bits(v))
		}
	default:
		if dst, zero, ok = d.integer(f.kind, dst); !ok {
			return dst, false
		}
	}
	if zero && skipZero {
		return dst[:start], true
	}
	return dst, true
}

// backpatchLength writes the length of dst[mark+1:] as a varint at
// dst[mark], moving the bytes after it when the varint needs more room.
func backpatchLength(dst []byte, mark int) []byte {
	n := len(dst) - mark - 1
	if n < 0x80 {
		dst[mark] = byte(n)
		return dst
	}
	size := protowire.SizeVarint(uint64(n))
	dst = append(dst, make([]byte, size-1)...)
	copy(dst[mark+size:], dst[mark+1:mark+1+n])
	protowire.AppendVarint(dst[:mark], uint64(n))
	return dst
}

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
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return d.b[start:j], utf8.Valid(d.b[start:j])
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// stringValue reads a JSON string, decoding simple escapes. Escapes of
// UTF-16 surrogates, control characters and invalid UTF-8 take the
// general path.
func (d *fastDecoder) stringValue() ([]byte, bool) {
	if d.peek() != '"' {
		return nil, false
	}
	start := d.i + 1
	j := start
	for j < len(d.b) && d.b[j] != '"' && d.b[j] != '\\' && d.b[j] >= 0x20 {
		j++
	}
	if j < len(d.b) && d.b[j] == '"' {
		d.i = j + 1
		s := d.b[start:j]
		return s, utf8.Valid(s)
	}
	// Slow lane of the fast path: unescape into a new slice.
	out := append([]byte(nil), d.b[start:j]...)
	for j < len(d.b) {
		c := d.b[j]
		switch {
		case c == '"':
			d.i = j + 1
			return out, utf8.Valid(out)
		case c < 0x20:
			return nil, false
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(d.b) {
			return nil, false
		}
		switch e := d.b[j+1]; e {
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
			if len(d.b)-j < 6 {
				return nil, false
			}
			r, err := strconv.ParseUint(string(d.b[j+2:j+6]), 16, 16)
			if err != nil || (r >= 0xD800 && r < 0xE000) {
				return nil, false
			}
			out = utf8.AppendRune(out, rune(r))
			j += 6
			continue
		default:
			return nil, false
		}
		j += 2
	}
	return nil, false
}

// decodeBase64 decodes s as protojson does: standard or URL alphabet, with
// or without padding.
func decodeBase64(s []byte) ([]byte, bool) {
	enc := base64.StdEncoding
	for _, c := range s {
		if c == '-' || c == '_' {
			enc = base64.URLEncoding
			break
		}
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	out := make([]byte, enc.DecodedLen(len(s)))
	n, err := enc.Decode(out, s)
	if err != nil {
		return nil, false
	}
	return out[:n], true
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
	}
	d.i = j
	return tok, true
}

// float reads a JSON number as a float or double. Strings ("NaN", "1.5")
// and values out of range take the general path.
func (d *fastDecoder) float(is32 bool) (float64, bool) {
	if d.peek() == '"' {
		return 0, false
	}
	tok, ok := d.number()
	if !ok {
		return 0, false
	}
	bits := 64
	if is32 {
		bits = 32
	}
	v, err := strconv.ParseFloat(string(tok), bits)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// integer reads an integer of kind k, bare or as a string, and appends its
// wire form. Fractions and exponents take the general path.
func (d *fastDecoder) integer(k protoreflect.Kind, dst []byte) ([]byte, bool, bool) {
	tok, ok := d.number()
	if !ok {
		return dst, false, false
	}
	for _, c := range tok {
		if c == '.' || c == 'e' || c == 'E' {
			return dst, false, false
		}
	}
	s := string(tok)
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return dst, false, false
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
			return dst, false, false
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
			return dst, false, false
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
			return dst, false, false
		}
		if k == protoreflect.Uint64Kind {
			dst = protowire.AppendVarint(dst, v)
		} else {
			dst = protowire.AppendFixed64(dst, v)
		}
		return dst, v == 0, true
	}
	return dst, false, false
}
