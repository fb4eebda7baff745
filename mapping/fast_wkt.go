package mapping

import (
	"encoding/binary"
	"math"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The well-known types on the fast path, both ways, as protojson writes
// and reads them (encoding/protojson/well_known_types.go).

// Timestamp and Duration bounds, as protojson checks them.
const (
	maxTimestampSeconds = 253402300799 // 9999-12-31T23:59:59Z
	minTimestampSeconds = -62135596800 // 0001-01-01T00:00:00Z
	maxDurationSeconds  = 315576000000
	maxNanos            = 999999999
	valueNullTag        = 1 << 3   // Value.null_value, varint (wire type 0)
	valueNumberTag      = 2<<3 | 1 // Value.number_value, fixed64
	valueStringTag      = 3<<3 | 2 // Value.string_value
	valueBoolTag        = 4 << 3   // Value.bool_value, varint (wire type 0)
	valueStructTag      = 5<<3 | 2 // Value.struct_value
	valueListTag        = 6<<3 | 2 // Value.list_value
	valueStructFieldNum = 5
	valueListFieldNum   = 6
)

// wellKnown reads the JSON of a well-known type pl at d.i and appends its
// message content (without tag or length) to dst.
func (d *fastDecoder) wellKnown(pl *plan, dst []byte, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		return dst, d.fail(reasonDepth)
	}
	switch pl.wkt {
	case wktTimestamp, wktDuration:
		if d.peek() != '"' {
			return dst, d.fail(reasonValue)
		}
		end, escapes, ok := d.strEnd()
		if !ok {
			return dst, false
		}
		if escapes {
			return dst, d.fail(reasonWKT)
		}
		s := d.b[d.i+1 : end]
		d.i = end + 1
		var secs int64
		var nanos int32
		if pl.wkt == wktTimestamp {
			secs, nanos, ok = parseTimestamp(s)
		} else {
			secs, nanos, ok = parseDuration(s)
		}
		if !ok {
			return dst, d.fail(reasonWKT)
		}
		if secs != 0 {
			dst = protowire.AppendVarint(append(dst, 1<<3), uint64(secs)) // seconds, varint
		}
		if nanos != 0 {
			dst = protowire.AppendVarint(append(dst, 2<<3), uint64(int64(nanos))) // nanos, varint
		}
		return dst, true
	case wktWrapper:
		if d.peek() == 'n' { // null inside a list or a map: protojson refuses it
			return dst, d.fail(reasonValue)
		}
		return d.singular(pl.inner, dst, depth, true)
	case wktStruct:
		return d.mapObject(pl.inner, dst, depth)
	case wktList:
		return d.fieldValue(pl.inner, dst, depth)
	case wktValue:
		return d.value(pl, dst, depth)
	}
	return dst, d.fail(reasonType)
}

// value reads any JSON value as a google.protobuf.Value.
func (d *fastDecoder) value(pl *plan, dst []byte, depth int) ([]byte, bool) {
	switch c := d.peek(); c {
	case 'n':
		if !d.literal("null") {
			return dst, d.fail(reasonSyntax)
		}
		return append(dst, valueNullTag, 0), true
	case 't':
		if !d.literal("true") {
			return dst, d.fail(reasonSyntax)
		}
		return append(dst, valueBoolTag, 1), true
	case 'f':
		if !d.literal("false") {
			return dst, d.fail(reasonSyntax)
		}
		return append(dst, valueBoolTag, 0), true
	case '"':
		return d.appendStringField(append(dst, valueStringTag))
	case '{', '[':
		sub := pl.fieldByNum(valueStructFieldNum).msg
		tag := byte(valueStructTag)
		if c == '[' {
			sub, tag = pl.fieldByNum(valueListFieldNum).msg, valueListTag
		}
		dst = append(dst, tag, 0)
		mark := len(dst) - 1
		var ok bool
		if dst, ok = d.wellKnown(sub, dst, depth+1); !ok {
			return dst, false
		}
		return backpatchLength(dst, mark), true
	}
	if c := d.peek(); c != '-' && (c < '0' || c > '9') {
		return dst, d.fail(reasonSyntax)
	}
	tok, ok := d.number()
	if !ok {
		return dst, d.fail(reasonSyntax)
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return dst, d.fail(reasonNumber)
	}
	return protowire.AppendFixed64(append(dst, valueNumberTag), math.Float64bits(v)), true
}

// parseTimestamp reads "YYYY-MM-DDThh:mm:ss[.f{1,9}]Z", the form protojson
// writes. Time zone offsets and other forms time.Parse takes are left to
// protojson.
func parseTimestamp(s []byte) (int64, int32, bool) {
	if len(s) < 20 || s[len(s)-1] != 'Z' || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return 0, 0, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range s[i : i+n] {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if year < 1 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return 0, 0, false
	}
	if day > daysIn(month, year) {
		return 0, 0, false
	}
	var nanos int32
	if rest := s[19 : len(s)-1]; len(rest) > 0 {
		if rest[0] != '.' || len(rest) < 2 || len(rest) > 10 {
			return 0, 0, false
		}
		scale := int32(1e9)
		for _, c := range rest[1:] {
			if c < '0' || c > '9' {
				return 0, 0, false
			}
			scale /= 10
			nanos += int32(c-'0') * scale
		}
	}
	secs := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC).Unix()
	return secs, nanos, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// parseDuration reads a Duration as protojson does: an optional sign,
// seconds, up to 9 fractional digits and "s" ("1s", "-0.5s", "1.s",
// ".1s", "+1s"), within ±315,576,000,000 s.
func parseDuration(b []byte) (int64, int32, bool) {
	if len(b) < 2 || b[len(b)-1] != 's' {
		return 0, 0, false
	}
	b = b[:len(b)-1]
	neg := false
	switch b[0] {
	case '-':
		neg = true
		b = b[1:]
	case '+':
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, 0, false
	}
	var secs int64
	switch {
	case b[0] == '0':
		b = b[1:]
	case '1' <= b[0] && b[0] <= '9':
		n := 0
		for n < len(b) && '0' <= b[n] && b[n] <= '9' {
			n++
		}
		v, err := strconv.ParseInt(string(b[:n]), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		secs, b = v, b[n:]
	case b[0] == '.':
	default:
		return 0, 0, false
	}
	var nanos int64
	if len(b) > 0 {
		if b[0] != '.' {
			return 0, 0, false
		}
		b = b[1:]
		n := 0
		scale := int64(1e9)
		for len(b) > 0 && n < 9 && '0' <= b[0] && b[0] <= '9' {
			scale /= 10
			nanos += int64(b[0]-'0') * scale
			n++
			b = b[1:]
		}
		if len(b) > 0 {
			return 0, 0, false
		}
	}
	if neg {
		secs, nanos = -secs, -nanos
	}
	if secs < -maxDurationSeconds || secs > maxDurationSeconds {
		return 0, 0, false
	}
	return secs, int32(nanos), true
}

// wellKnown appends the JSON of the well-known type pl whose message
// content is b.
func (e *fastEncoder) wellKnown(pl *plan, dst, b []byte, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		return dst, e.fail(reasonDepth)
	}
	switch pl.wkt {
	case wktTimestamp, wktDuration:
		var secs, nanos int64
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return dst, e.fail(reasonWire)
			}
			b = b[n:]
			if (num == 1 || num == 2) && typ == protowire.VarintType {
				v, n := protowire.ConsumeVarint(b)
				if n < 0 {
					return dst, e.fail(reasonWire)
				}
				b = b[n:]
				if num == 1 {
					secs = int64(v)
				} else {
					nanos = int64(int32(v))
				}
				continue
			}
			if num == 1 || num == 2 || typ == protowire.StartGroupType || typ == protowire.EndGroupType {
				return dst, e.fail(reasonWire)
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return dst, e.fail(reasonWire)
			}
			b = b[n:]
		}
		if pl.wkt == wktTimestamp {
			return e.timestamp(dst, secs, nanos)
		}
		return e.duration(dst, secs, nanos)
	case wktWrapper:
		val, typ, ok := e.lastField(b, 1)
		if !ok {
			return dst, false
		}
		if val == nil {
			val, typ = zeroWire[pl.inner.wireType], pl.inner.wireType
		}
		dst, _, _, ok = e.value(pl.inner, dst, val, typ, depth, true)
		return dst, ok
	case wktStruct:
		dst = append(dst, '{')
		mark := len(e.entries)
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return dst, e.fail(reasonWire)
			}
			b = b[n:]
			if num == 1 && typ == protowire.BytesType {
				v, n := protowire.ConsumeBytes(b)
				if n < 0 || !e.entry(pl.inner, v) {
					return dst, e.fail(reasonWire)
				}
				b = b[n:]
				continue
			}
			if num == 1 || typ == protowire.StartGroupType || typ == protowire.EndGroupType {
				return dst, e.fail(reasonWire)
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return dst, e.fail(reasonWire)
			}
			b = b[n:]
		}
		var ok bool
		if dst, ok = e.entries2JSON(pl.inner, dst, mark, depth); !ok {
			return dst, false
		}
		return append(dst, '}'), true
	case wktList:
		dst = append(dst, '[')
		count := 0
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return dst, e.fail(reasonWire)
			}
			b = b[n:]
			if num == 1 && typ == protowire.BytesType {
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return dst, e.fail(reasonWire)
				}
				b = b[n:]
				if count > 0 {
					dst = append(dst, ',')
				}
				count++
				var ok bool
				if dst, ok = e.wellKnown(pl.inner.msg, dst, v, depth+1); !ok {
					return dst, false
				}
				continue
			}
			if num == 1 || typ == protowire.StartGroupType || typ == protowire.EndGroupType {
				return dst, e.fail(reasonWire)
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return dst, e.fail(reasonWire)
			}
			b = b[n:]
		}
		return append(dst, ']'), true
	case wktValue:
		return e.value2JSON(pl, dst, b, depth)
	}
	return dst, e.fail(reasonType)
}

// value2JSON writes a google.protobuf.Value: the member of its oneof kind
// that comes last on the wire, as proto.Unmarshal keeps it.
func (e *fastEncoder) value2JSON(pl *plan, dst, b []byte, depth int) ([]byte, bool) {
	var kind protowire.Number
	var val []byte
	msgs := 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return dst, e.fail(reasonWire)
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 || typ == protowire.StartGroupType || typ == protowire.EndGroupType {
			return dst, e.fail(reasonWire)
		}
		if f := pl.fieldByNum(num); f != nil {
			if typ != f.wireType {
				return dst, e.fail(reasonWire)
			}
			if f.kind == protoreflect.MessageKind {
				if msgs++; msgs > 1 { // proto.Unmarshal may merge them
					return dst, e.fail(reasonWire)
				}
			}
			kind, val = num, b[:n]
		}
		b = b[n:]
	}
	switch kind {
	case 0:
		return dst, e.fail(reasonRange) // protojson: none of the oneof fields is set
	case 1:
		return append(dst, "null"...), true
	case 2:
		v := math.Float64frombits(binary.LittleEndian.Uint64(val))
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return dst, e.fail(reasonRange)
		}
		return appendFloat(dst, v, 64), true
	}
	f := pl.fieldByNum(kind)
	dst, _, _, ok := e.value(f, dst, val, f.wireType, depth, true)
	return dst, ok
}

// lastField finds the last value of field num in the message content b
// (proto.Unmarshal keeps the last of a scalar field), with its wire type.
// A nil value means the field is absent.
func (e *fastEncoder) lastField(b []byte, want protowire.Number) ([]byte, protowire.Type, bool) {
	var val []byte
	var vtyp protowire.Type
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ == protowire.StartGroupType || typ == protowire.EndGroupType {
			return nil, 0, e.fail(reasonWire)
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil, 0, e.fail(reasonWire)
		}
		if num == want {
			val, vtyp = b[:n], typ
		}
		b = b[n:]
	}
	return val, vtyp, true
}

// timestamp writes secs and nanos as protojson does: RFC 3339 in UTC with
// 0, 3, 6 or 9 fractional digits.
func (e *fastEncoder) timestamp(dst []byte, secs, nanos int64) ([]byte, bool) {
	if secs < minTimestampSeconds || secs > maxTimestampSeconds || nanos < 0 || nanos > maxNanos {
		return dst, e.fail(reasonRange)
	}
	dst = append(dst, '"')
	dst = time.Unix(secs, 0).UTC().AppendFormat(dst, "2006-01-02T15:04:05")
	dst = appendNanos(dst, nanos)
	return append(dst, 'Z', '"'), true
}

// duration writes secs and nanos as protojson does: "-1.500s".
func (e *fastEncoder) duration(dst []byte, secs, nanos int64) ([]byte, bool) {
	if secs < -maxDurationSeconds || secs > maxDurationSeconds || nanos < -maxNanos || nanos > maxNanos ||
		secs > 0 && nanos < 0 || secs < 0 && nanos > 0 {
		return dst, e.fail(reasonRange)
	}
	dst = append(dst, '"')
	if secs < 0 || nanos < 0 {
		dst = append(dst, '-')
		secs, nanos = -secs, -nanos
	}
	dst = strconv.AppendInt(dst, secs, 10)
	dst = appendNanos(dst, nanos)
	return append(dst, 's', '"'), true
}

// appendNanos writes ".nnn", ".nnnnnn" or ".nnnnnnnnn", the shortest of
// them that holds nanos, or nothing for 0.
func appendNanos(dst []byte, nanos int64) []byte {
	if nanos == 0 {
		return dst
	}
	digits := 9
	for digits > 3 && nanos%1000 == 0 {
		nanos /= 1000
		digits -= 3
	}
	dst = append(dst, '.')
	var buf [9]byte
	for i := digits - 1; i >= 0; i-- {
		buf[i] = byte('0' + nanos%10)
		nanos /= 10
	}
	return append(dst, buf[:digits]...)
}
