package mapping

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// appendResult appends the protojson form of the wire message b to dst,
// reading the wire bytes in one pass. It gives up (ok == false) on what it
// cannot render exactly as protojson would: a singular field seen twice
// (protobuf merges or overrides those), two members of one oneof (the last
// wins), a repeated field whose values are not contiguous, a wire type that
// does not match the field, invalid UTF-8, an unknown value of a closed
// enum, groups.
func (pl *plan) appendResult(dst, b []byte) ([]byte, bool) {
	return pl.message(dst, b, 0)
}

func (pl *plan) message(dst, b []byte, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		return dst, false
	}
	dst = append(dst, '{')
	first := true
	var done, oneofs bitset
	var open *field // the repeated field whose array is open
	elems := 0      // the values written into it
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return dst, false
		}
		b = b[n:]
		f := pl.fieldByNum(num)
		if f == nil { // unknown fields are not rendered
			if typ == protowire.StartGroupType || typ == protowire.EndGroupType {
				return dst, false
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return dst, false
			}
			b = b[n:]
			continue
		}
		if open != nil && open != f {
			if elems > 0 {
				dst = append(dst, ']')
			}
			open = nil
		}
		if open == nil && done.testAndSet(f.index) {
			return dst, false // seen before: merged, overridden or split
		}
		if f.oneof >= 0 && oneofs.testAndSet(f.oneof) {
			return dst, false // another member of its oneof came first: the last one wins
		}
		var ok bool
		if !f.list {
			var skip bool
			mark := len(dst)
			if !first {
				dst = append(dst, ',')
			}
			dst = append(dst, f.key...)
			if dst, n, skip, ok = f.value(dst, b, typ, depth); !ok {
				return dst, false
			}
			b = b[n:]
			if skip {
				dst = dst[:mark]
				continue
			}
			first = false
			continue
		}
		if open == nil {
			open, elems = f, 0
		}
		if typ == protowire.BytesType && f.wireType != protowire.BytesType { // packed scalars
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return dst, false
			}
			b = b[m:]
			for len(v) > 0 {
				dst = elemSep(dst, f, elems, &first)
				elems++
				if dst, m, _, ok = f.value(dst, v, f.wireType, depth); !ok {
					return dst, false
				}
				v = v[m:]
			}
			continue
		}
		dst = elemSep(dst, f, elems, &first)
		elems++
		if dst, n, _, ok = f.value(dst, b, typ, depth); !ok {
			return dst, false
		}
		b = b[n:]
	}
	if open != nil && elems > 0 {
		dst = append(dst, ']')
	}
	return append(dst, '}'), true
}

// elemSep writes what goes before element number elems of the repeated
// field f: its key and "[" before the first (so empty lists are left out,
// as protojson does), a comma before the others.
func elemSep(dst []byte, f *field, elems int, first *bool) []byte {
	if elems > 0 {
		return append(dst, ',')
	}
	if !*first {
		dst = append(dst, ',')
	}
	*first = false
	dst = append(dst, f.key...)
	return append(dst, '[')
}

// value appends the JSON of one wire value of f read from b and returns
// the bytes it consumed. skip reports a zero value of a field without
// presence, which protojson leaves out.
func (f *field) value(dst, b []byte, typ protowire.Type, depth int) (out []byte, n int, skip, ok bool) {
	if typ != f.wireType {
		return dst, 0, false, false
	}
	noPresence := !f.presence && !f.list
	switch typ {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return dst, 0, false, false
		}
		if v == 0 && noPresence {
			return dst, n, true, true
		}
		switch f.kind {
		case protoreflect.BoolKind:
			if v > 1 {
				return dst, 0, false, false
			}
			dst = strconv.AppendBool(dst, v == 1)
		case protoreflect.EnumKind:
			num := int32(v)
			if name, known := f.enum.byNum[num]; known {
				dst = append(dst, '"')
				dst = append(dst, name...)
				dst = append(dst, '"')
			} else if f.enum.closed {
				return dst, 0, false, false
			} else {
				dst = strconv.AppendInt(dst, int64(num), 10)
			}
		case protoreflect.Int32Kind:
			dst = strconv.AppendInt(dst, int64(int32(v)), 10)
		case protoreflect.Sint32Kind:
			dst = strconv.AppendInt(dst, int64(int32(protowire.DecodeZigZag(v&math.MaxUint32))), 10)
		case protoreflect.Uint32Kind:
			dst = strconv.AppendUint(dst, uint64(uint32(v)), 10)
		case protoreflect.Int64Kind:
			dst = quotedInt(dst, int64(v))
		case protoreflect.Sint64Kind:
			dst = quotedInt(dst, protowire.DecodeZigZag(v))
		case protoreflect.Uint64Kind:
			dst = append(strconv.AppendUint(append(dst, '"'), v, 10), '"')
		default:
			return dst, 0, false, false
		}
		return dst, n, false, true
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		if n < 0 {
			return dst, 0, false, false
		}
		if v == 0 && noPresence {
			return dst, n, true, true
		}
		switch f.kind {
		case protoreflect.Fixed32Kind:
			dst = strconv.AppendUint(dst, uint64(v), 10)
		case protoreflect.Sfixed32Kind:
			dst = strconv.AppendInt(dst, int64(int32(v)), 10)
		default: // float
			dst = appendFloat(dst, float64(math.Float32frombits(v)), 32)
		}
		return dst, n, false, true
	case protowire.Fixed64Type:
		v, n := protowire.ConsumeFixed64(b)
		if n < 0 {
			return dst, 0, false, false
		}
		if v == 0 && noPresence {
			return dst, n, true, true
		}
		switch f.kind {
		case protoreflect.Fixed64Kind:
			dst = append(strconv.AppendUint(append(dst, '"'), v, 10), '"')
		case protoreflect.Sfixed64Kind:
			dst = quotedInt(dst, int64(v))
		default: // double
			dst = appendFloat(dst, math.Float64frombits(v), 64)
		}
		return dst, n, false, true
	case protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return dst, 0, false, false
		}
		switch f.kind {
		case protoreflect.MessageKind:
			var ok bool
			if dst, ok = f.msg.message(dst, v, depth+1); !ok {
				return dst, 0, false, false
			}
			return dst, n, false, true
		case protoreflect.StringKind:
			if len(v) == 0 && noPresence {
				return dst, n, true, true
			}
			var ok bool
			if dst, ok = appendJSONString(dst, v); !ok {
				return dst, 0, false, false
			}
		default: // bytes
			if len(v) == 0 && noPresence {
				return dst, n, true, true
			}
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, v)
			dst = append(dst, '"')
		}
		return dst, n, false, true
	}
	return dst, 0, false, false
}

func quotedInt(dst []byte, v int64) []byte {
	return append(strconv.AppendInt(append(dst, '"'), v, 10), '"')
}

// appendFloat writes a float as protojson does: "NaN", "Infinity" and
// "-Infinity" as strings, exponents only for very small or large values.
func appendFloat(dst []byte, v float64, bits int) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(v, -1):
		return append(dst, `"-Infinity"`...)
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, v, format, -1, bits)
	if format == 'e' { // 1e-07 -> 1e-7
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendJSONString writes s as a JSON string; invalid UTF-8 fails.
func appendJSONString(dst, s []byte) ([]byte, bool) {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, false
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' && c != 0x7f {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}
