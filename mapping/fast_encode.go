package mapping

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// fastEncoder writes the protojson form of wire bytes, reading them in one
// pass. It gives up (ok == false, why set) on what it cannot render
// exactly as protojson would: a singular message field seen twice
// (protobuf merges those), two members of one oneof (the last wins), a
// repeated or map field whose values are not contiguous, a wire type that
// does not match the field, invalid UTF-8, an unknown value of a closed
// enum, groups, well-known types protojson refuses to write.
//
// Fields are written in the order they come on the wire, which is
// protojson's order (declaration order) whenever the fields are declared
// in the order of their numbers, as proto.Marshal writes them; map entries
// are sorted by key, as protojson sorts them.
type fastEncoder struct {
	why reason
	// entries is a stack of the map entries being sorted.
	entries []mapEntry
}

// mapEntry is one entry of a map field on the wire.
type mapEntry struct {
	skey   []byte // string keys
	ikey   int64  // signed keys
	ukey   uint64 // unsigned and bool keys
	val    []byte // the wire value, nil when absent
	valTyp protowire.Type
}

var encoders = sync.Pool{New: func() any { return new(fastEncoder) }}

// zeroWire is the wire form of a zero value of each wire type, for map
// entries and wrappers without a value.
var zeroWire = [...][]byte{
	protowire.VarintType:  {0},
	protowire.Fixed64Type: {0, 0, 0, 0, 0, 0, 0, 0},
	protowire.BytesType:   {0},
	protowire.Fixed32Type: {0, 0, 0, 0},
}

func (e *fastEncoder) fail(r reason) bool {
	if e.why == reasonNone {
		e.why = r
	}
	return false
}

// appendResult appends the protojson form of the wire message b to dst.
func (pl *plan) appendResult(dst, b []byte) ([]byte, bool) {
	out, ok, _ := pl.appendResultWhy(dst, b)
	return out, ok
}

// appendResultWhy is appendResult that also says why it gave up.
func (pl *plan) appendResultWhy(dst, b []byte) ([]byte, bool, reason) {
	e := encoders.Get().(*fastEncoder)
	e.why, e.entries = reasonNone, e.entries[:0]
	dst, ok := e.message(pl, dst, b, 0)
	why := e.why
	clear(e.entries) // no references into b stay in the pool
	if cap(e.entries) > 4096 {
		e.entries = nil
	}
	encoders.Put(e)
	return dst, ok, why
}

func (e *fastEncoder) message(pl *plan, dst, b []byte, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		return dst, e.fail(reasonDepth)
	}
	dst = append(dst, '{')
	first := true
	var done, oneofs bitset
	var open *field // the repeated or map field whose values are being read
	elems := 0      // the values written into it
	mapMark := 0    // where open's map entries start in e.entries
	var ok bool
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return dst, e.fail(reasonWire)
		}
		b = b[n:]
		f := pl.fieldByNum(num)
		if f == nil { // unknown fields are not rendered
			if typ == protowire.StartGroupType || typ == protowire.EndGroupType {
				return dst, e.fail(reasonWire)
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return dst, e.fail(reasonWire)
			}
			b = b[n:]
			continue
		}
		if open != nil && open != f {
			if dst, ok = e.close(open, dst, elems, mapMark, &first, depth); !ok {
				return dst, false
			}
			open = nil
		}
		if open == nil && done.testAndSet(f.index) {
			return dst, e.fail(reasonWire) // seen before: merged, overridden or split
		}
		if f.oneof >= 0 && oneofs.testAndSet(f.oneof) {
			return dst, e.fail(reasonWire) // another member of its oneof came first: the last one wins
		}
		if f.isMap {
			if open == nil {
				open, mapMark = f, len(e.entries)
			}
			v, m := protowire.ConsumeBytes(b)
			if typ != protowire.BytesType || m < 0 || !e.entry(f, v) {
				return dst, e.fail(reasonWire)
			}
			b = b[m:]
			continue
		}
		if !f.list {
			var skip bool
			mark := len(dst)
			if !first {
				dst = append(dst, ',')
			}
			dst = append(dst, f.key...)
			if dst, n, skip, ok = e.value(f, dst, b, typ, depth, false); !ok {
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
				return dst, e.fail(reasonWire)
			}
			b = b[m:]
			for len(v) > 0 {
				dst = elemSep(dst, f, elems, &first)
				elems++
				if dst, m, _, ok = e.value(f, dst, v, f.wireType, depth, true); !ok {
					return dst, false
				}
				v = v[m:]
			}
			continue
		}
		dst = elemSep(dst, f, elems, &first)
		elems++
		if dst, n, _, ok = e.value(f, dst, b, typ, depth, true); !ok {
			return dst, false
		}
		b = b[n:]
	}
	if open != nil {
		if dst, ok = e.close(open, dst, elems, mapMark, &first, depth); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// close ends the values of the repeated or map field f: the "]" of a list
// (empty lists are left out, as protojson does), the whole object of a map.
func (e *fastEncoder) close(f *field, dst []byte, elems, mapMark int, first *bool, depth int) ([]byte, bool) {
	if !f.isMap {
		if elems > 0 {
			dst = append(dst, ']')
		}
		return dst, true
	}
	if !*first {
		dst = append(dst, ',')
	}
	*first = false
	dst = append(dst, f.key...)
	dst = append(dst, '{')
	var ok bool
	if dst, ok = e.entries2JSON(f, dst, mapMark, depth); !ok {
		return dst, false
	}
	return append(dst, '}'), true
}

// entry reads one map entry of f from its wire bytes v onto e.entries.
func (e *fastEncoder) entry(f *field, v []byte) bool {
	var me mapEntry
	var haveKey bool
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 || typ == protowire.StartGroupType || typ == protowire.EndGroupType {
			return false
		}
		v = v[n:]
		m := protowire.ConsumeFieldValue(num, typ, v)
		if m < 0 {
			return false
		}
		switch num {
		case 1:
			if typ != f.mapKey.wireType || haveKey {
				return false
			}
			haveKey = true
			if !decodeKey(f.mapKey, v[:m], &me) {
				return false
			}
		case 2:
			if typ != f.mapVal.wireType || me.val != nil {
				return false
			}
			me.val, me.valTyp = v[:m], typ
		}
		v = v[m:]
	}
	e.entries = append(e.entries, me)
	return true
}

// decodeKey reads the wire value b of the map key field k into me.
func decodeKey(k *field, b []byte, me *mapEntry) bool {
	switch k.wireType {
	case protowire.BytesType:
		s, n := protowire.ConsumeBytes(b)
		me.skey = s
		return n >= 0
	case protowire.Fixed32Type:
		v, _ := protowire.ConsumeFixed32(b)
		if k.kind == protoreflect.Sfixed32Kind {
			me.ikey = int64(int32(v))
		} else {
			me.ukey = uint64(v)
		}
	case protowire.Fixed64Type:
		v, _ := protowire.ConsumeFixed64(b)
		if k.kind == protoreflect.Sfixed64Kind {
			me.ikey = int64(v)
		} else {
			me.ukey = v
		}
	default:
		v, _ := protowire.ConsumeVarint(b)
		switch k.kind {
		case protoreflect.BoolKind:
			if v > 1 {
				return false
			}
			me.ukey = v
		case protoreflect.Int32Kind:
			me.ikey = int64(int32(v))
		case protoreflect.Int64Kind:
			me.ikey = int64(v)
		case protoreflect.Sint32Kind:
			me.ikey = int64(int32(protowire.DecodeZigZag(v & math.MaxUint32)))
		case protoreflect.Sint64Kind:
			me.ikey = protowire.DecodeZigZag(v)
		case protoreflect.Uint32Kind:
			me.ukey = uint64(uint32(v))
		default:
			me.ukey = v
		}
	}
	return true
}

// signedKey reports whether map keys of kind k are compared as signed
// integers.
func signedKey(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
		protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
		return true
	}
	return false
}

// entries2JSON writes the map entries e.entries[mark:] of f, sorted by key
// as protojson sorts them (the last of equal keys wins, as in
// proto.Unmarshal), as the members of a JSON object, and drops them.
func (e *fastEncoder) entries2JSON(f *field, dst []byte, mark, depth int) ([]byte, bool) {
	end := len(e.entries)
	es := e.entries[mark:end]
	k := f.mapKey
	var compare func(a, b mapEntry) int
	switch {
	case k.kind == protoreflect.StringKind:
		compare = func(a, b mapEntry) int { return bytes.Compare(a.skey, b.skey) }
	case signedKey(k.kind):
		compare = func(a, b mapEntry) int { return cmp.Compare(a.ikey, b.ikey) }
	default:
		compare = func(a, b mapEntry) int { return cmp.Compare(a.ukey, b.ukey) }
	}
	if !slices.IsSortedFunc(es, compare) {
		slices.SortStableFunc(es, compare)
	}
	written := 0
	for i := mark; i < end; i++ {
		if i+1 < end && compare(e.entries[i], e.entries[i+1]) == 0 {
			continue // a later entry has the same key
		}
		if written > 0 {
			dst = append(dst, ',')
		}
		written++
		me := e.entries[i] // a copy: e.entries may grow below
		switch {
		case k.kind == protoreflect.StringKind:
			var ok bool
			if dst, ok = appendJSONString(dst, me.skey); !ok {
				return dst, e.fail(reasonRange)
			}
		case k.kind == protoreflect.BoolKind:
			dst = append(strconv.AppendBool(append(dst, '"'), me.ukey == 1), '"')
		case signedKey(k.kind):
			dst = quotedInt(dst, me.ikey)
		default:
			dst = append(strconv.AppendUint(append(dst, '"'), me.ukey, 10), '"')
		}
		dst = append(dst, ':')
		val, typ := me.val, me.valTyp
		if val == nil {
			val, typ = zeroWire[f.mapVal.wireType], f.mapVal.wireType
		}
		var ok bool
		if dst, _, _, ok = e.value(f.mapVal, dst, val, typ, depth, true); !ok {
			return dst, false
		}
	}
	clear(e.entries[mark:])
	e.entries = e.entries[:mark]
	return dst, true
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
// presence, which protojson leaves out; always (list elements, map values,
// wrappers) writes zero values too.
func (e *fastEncoder) value(f *field, dst, b []byte, typ protowire.Type, depth int, always bool) (out []byte, n int, skip, ok bool) {
	if typ != f.wireType {
		return dst, 0, false, e.fail(reasonWire)
	}
	noPresence := !f.presence && !always
	switch typ {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return dst, 0, false, e.fail(reasonWire)
		}
		if v == 0 && noPresence {
			return dst, n, true, true
		}
		switch f.kind {
		case protoreflect.BoolKind:
			if v > 1 {
				return dst, 0, false, e.fail(reasonWire)
			}
			dst = strconv.AppendBool(dst, v == 1)
		case protoreflect.EnumKind:
			num := int32(v)
			if f.enum.null {
				dst = append(dst, "null"...)
			} else if name, known := f.enum.byNum[num]; known {
				dst = append(dst, '"')
				dst = append(dst, name...)
				dst = append(dst, '"')
			} else if f.enum.closed {
				return dst, 0, false, e.fail(reasonWire)
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
			return dst, 0, false, e.fail(reasonWire)
		}
		return dst, n, false, true
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		if n < 0 {
			return dst, 0, false, e.fail(reasonWire)
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
			return dst, 0, false, e.fail(reasonWire)
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
			return dst, 0, false, e.fail(reasonWire)
		}
		switch f.kind {
		case protoreflect.MessageKind:
			var ok bool
			if f.msg.wkt != wktNone {
				dst, ok = e.wellKnown(f.msg, dst, v, depth+1)
			} else {
				dst, ok = e.message(f.msg, dst, v, depth+1)
			}
			if !ok {
				return dst, 0, false, false
			}
			return dst, n, false, true
		case protoreflect.StringKind:
			if len(v) == 0 && noPresence {
				return dst, n, true, true
			}
			var ok bool
			if dst, ok = appendJSONString(dst, v); !ok {
				return dst, 0, false, e.fail(reasonRange)
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
	return dst, 0, false, e.fail(reasonWire)
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

// appendJSONString writes s as a JSON string, escaped byte for byte as
// protojson escapes it ('"', '\\' and control characters only); invalid
// UTF-8 fails.
func appendJSONString(dst, s []byte) ([]byte, bool) {
	all := s
	nonASCII := false
	dst = append(dst, '"')
	for len(s) > 0 {
		i, na := jsonscan.Plain(s)
		nonASCII = nonASCII || na
		dst = append(dst, s[:i]...)
		if i == len(s) {
			break
		}
		switch c := s[i]; c {
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
		s = s[i+1:]
	}
	if nonASCII && !utf8.Valid(all) {
		return dst, false
	}
	return append(dst, '"'), true
}
