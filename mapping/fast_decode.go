package mapping

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fastDecoder turns a JSON object into protobuf wire bytes following a
// plan. Any method returning ok == false means "take the general path";
// why says the reason. The wire bytes are written straight into dst: the
// strings and bytes of the params are copied (and unescaped, or decoded
// from base64) once, from the params into dst.
type fastDecoder struct {
	b   []byte
	i   int
	why reason
	// keys and arena hold the map keys of the objects being read, for
	// finding duplicates: a stack, each map object truncates them back.
	keys  []keySpan
	arena []byte
}

// keySpan is one map key in the arena.
type keySpan struct{ start, end int32 }

var decoders = sync.Pool{New: func() any { return new(fastDecoder) }}

func getDecoder(b []byte) *fastDecoder {
	d := decoders.Get().(*fastDecoder)
	d.b, d.i, d.why = b, 0, reasonNone
	d.keys, d.arena = d.keys[:0], d.arena[:0]
	return d
}

func putDecoder(d *fastDecoder) {
	d.b = nil
	if cap(d.arena) > 64<<10 || cap(d.keys) > 4096 {
		d.arena, d.keys = nil, nil
	}
	decoders.Put(d)
}

// fail records why the fast path gives up and returns false.
func (d *fastDecoder) fail(r reason) bool {
	if d.why == reasonNone {
		d.why = r
	}
	return false
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
	out, ok, _ := pl.appendRequestWhy(dst, b)
	return out, ok
}

// appendRequestWhy is appendRequest that also says why it gave up.
func (pl *plan) appendRequestWhy(dst, b []byte) ([]byte, bool, reason) {
	d := getDecoder(b)
	defer putDecoder(d)
	if d.peek() != '{' {
		return dst, d.fail(reasonSyntax), d.why
	}
	dst, ok := d.object(pl, dst, 0)
	if ok {
		if d.space(); d.i != len(d.b) {
			ok = d.fail(reasonSyntax)
		}
	}
	return dst, ok, d.why
}

// object reads the JSON object at d.i as a message of pl.
func (d *fastDecoder) object(pl *plan, dst []byte, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		return dst, d.fail(reasonDepth)
	}
	if d.peek() != '{' {
		return dst, d.fail(reasonValue)
	}
	d.i++ // '{'
	var seen, oneofs bitset
	if d.peek() == '}' {
		d.i++
		return dst, true
	}
	next := 0
	for {
		if d.peek() != '"' {
			return dst, d.fail(reasonSyntax)
		}
		key, ok := d.plainString()
		if !ok {
			return dst, d.fail(reasonSyntax)
		}
		// Keys mostly come in declaration order: try the next field first.
		var f *field
		if next < len(pl.fields) && pl.fields[next].jsonName == string(key) {
			f = &pl.fields[next]
		} else {
			f = pl.byName[string(key)]
		}
		if f == nil || seen.testAndSet(f.index) {
			return dst, d.fail(reasonField)
		}
		next = f.index + 1
		if d.peek() != ':' {
			return dst, d.fail(reasonSyntax)
		}
		d.i++
		// JSON null leaves a field unset (protojson does not count it
		// as a oneof's member), but for Value and NullValue it is a value.
		if d.peek() == 'n' && !(f.nullable && !f.list) {
			if !d.literal("null") {
				return dst, d.fail(reasonSyntax)
			}
			if f.nullable { // a list of Value or NullValue: protojson wants an array
				return dst, d.fail(reasonValue)
			}
		} else {
			if f.oneof >= 0 && oneofs.testAndSet(f.oneof) {
				return dst, d.fail(reasonField)
			}
			if dst, ok = d.fieldValue(f, dst, depth); !ok {
				return dst, false
			}
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return dst, true
		default:
			return dst, d.fail(reasonSyntax)
		}
	}
}

func (d *fastDecoder) fieldValue(f *field, dst []byte, depth int) ([]byte, bool) {
	if f.isMap {
		return d.mapObject(f, dst, depth)
	}
	if !f.list {
		return d.singular(f, dst, depth, !f.presence)
	}
	if d.peek() != '[' {
		return dst, d.fail(reasonValue)
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return dst, true
	}
	for {
		if d.peek() == 'n' && !f.nullable {
			return dst, d.fail(reasonValue)
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
			return dst, d.fail(reasonSyntax)
		}
	}
}

// mapObject reads the JSON object at d.i as the entries of the map field f.
func (d *fastDecoder) mapObject(f *field, dst []byte, depth int) ([]byte, bool) {
	if d.peek() != '{' {
		return dst, d.fail(reasonValue)
	}
	d.i++
	mark := len(d.keys)
	if d.peek() == '}' {
		d.i++
		return dst, true
	}
	for {
		if d.peek() != '"' {
			return dst, d.fail(reasonSyntax)
		}
		dst = protowire.AppendTag(dst, f.num, protowire.BytesType)
		lenAt := len(dst)
		dst = append(dst, 0)
		var ok bool
		if dst, ok = d.mapKey(f.mapKey, dst); !ok {
			return dst, false
		}
		if d.peek() != ':' {
			return dst, d.fail(reasonSyntax)
		}
		d.i++
		if d.peek() == 'n' && !f.mapVal.nullable {
			return dst, d.fail(reasonValue)
		}
		if dst, ok = d.singular(f.mapVal, dst, depth, false); !ok {
			return dst, false
		}
		dst = backpatchLength(dst, lenAt)
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return dst, d.uniqueKeys(mark)
		default:
			return dst, d.fail(reasonSyntax)
		}
	}
}

// mapKey reads a JSON object key as the key field k of a map entry,
// appends it with its tag and records it for uniqueKeys. Keys are read as
// protojson reads them: strconv for integers, "true" and "false" for bools.
func (d *fastDecoder) mapKey(k *field, dst []byte) ([]byte, bool) {
	mark := len(d.arena)
	var ok bool
	if d.arena, ok = d.appendString(d.arena); !ok {
		return dst, false
	}
	key := d.arena[mark:]
	var v uint64
	switch k.kind {
	case protoreflect.StringKind:
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, key)
		d.keys = append(d.keys, keySpan{int32(mark), int32(len(d.arena))})
		return dst, true
	case protoreflect.BoolKind:
		switch string(key) {
		case "true":
			v = 1
		case "false":
		default:
			return dst, d.fail(reasonMapKey)
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		bits := 64
		if k.wireType == protowire.Fixed32Type || k.kind == protoreflect.Int32Kind || k.kind == protoreflect.Sint32Kind {
			bits = 32
		}
		n, err := strconv.ParseInt(string(key), 10, bits)
		if err != nil {
			return dst, d.fail(reasonMapKey)
		}
		v = uint64(n)
	default: // unsigned
		bits := 64
		if k.kind == protoreflect.Uint32Kind || k.kind == protoreflect.Fixed32Kind {
			bits = 32
		}
		n, err := strconv.ParseUint(string(key), 10, bits)
		if err != nil {
			return dst, d.fail(reasonMapKey)
		}
		v = n
	}
	// The key's value, not its text ("07" and "7" are the same key).
	d.arena = binary.BigEndian.AppendUint64(d.arena[:mark], v)
	d.keys = append(d.keys, keySpan{int32(mark), int32(len(d.arena))})
	dst = protowire.AppendTag(dst, 1, k.wireType)
	switch k.kind {
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(int64(v)))
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		dst = protowire.AppendFixed32(dst, uint32(v))
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		dst = protowire.AppendFixed64(dst, v)
	case protoreflect.Int32Kind:
		dst = protowire.AppendVarint(dst, uint64(int64(int32(v))))
	default:
		dst = protowire.AppendVarint(dst, v)
	}
	return dst, true
}

// uniqueKeys checks that the keys recorded since mark are all different
// (protojson refuses a map key given twice), and drops them.
func (d *fastDecoder) uniqueKeys(mark int) bool {
	keys := d.keys[mark:]
	ok := true
	if len(keys) <= 16 {
	outer:
		for i := 1; i < len(keys); i++ {
			ki := d.arena[keys[i].start:keys[i].end]
			for j := range i {
				if bytes.Equal(ki, d.arena[keys[j].start:keys[j].end]) {
					ok = false
					break outer
				}
			}
		}
	} else {
		arena := d.arena
		slices.SortFunc(keys, func(a, b keySpan) int {
			return bytes.Compare(arena[a.start:a.end], arena[b.start:b.end])
		})
		for i := 1; i < len(keys); i++ {
			if bytes.Equal(arena[keys[i].start:keys[i].end], arena[keys[i-1].start:keys[i-1].end]) {
				ok = false
				break
			}
		}
	}
	if mark < len(d.keys) {
		d.arena = d.arena[:d.keys[mark].start]
	}
	d.keys = d.keys[:mark]
	if !ok {
		return d.fail(reasonMapKey)
	}
	return true
}

// singular appends one value of f with its tag. When skipZero is set (a
// field without presence) a zero value is left out, as proto.Marshal does.
func (d *fastDecoder) singular(f *field, dst []byte, depth int, skipZero bool) ([]byte, bool) {
	start := len(dst)
	dst = protowire.AppendTag(dst, f.num, f.wireType)
	var zero, ok bool
	switch f.kind {
	case protoreflect.MessageKind:
		mark := len(dst)
		dst = append(dst, 0) // one length byte, widened below if needed
		if f.msg.wkt != wktNone {
			dst, ok = d.wellKnown(f.msg, dst, depth+1)
		} else {
			dst, ok = d.object(f.msg, dst, depth+1)
		}
		if !ok {
			return dst, false
		}
		return backpatchLength(dst, mark), true
	case protoreflect.StringKind:
		if d.peek() != '"' {
			return dst, d.fail(reasonValue)
		}
		mark := len(dst)
		if dst, ok = d.appendStringField(dst); !ok {
			return dst, false
		}
		zero = len(dst) == mark+1
	case protoreflect.BytesKind:
		if d.peek() != '"' {
			return dst, d.fail(reasonValue)
		}
		mark := len(dst)
		if dst, ok = d.appendBytesField(dst); !ok {
			return dst, false
		}
		zero = len(dst) == mark+1
	case protoreflect.BoolKind:
		switch {
		case d.literal("true"):
			dst = append(dst, 1)
		case d.literal("false"):
			zero = true
			dst = append(dst, 0)
		default:
			return dst, d.fail(reasonValue)
		}
	case protoreflect.EnumKind:
		var n int32
		if n, ok = d.enum(f.enum); !ok {
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

// enum reads an enum value: a name, a number (open enums only), or null
// for google.protobuf.NullValue.
func (d *fastDecoder) enum(e *enumPlan) (int32, bool) {
	switch c := d.peek(); {
	case c == '"':
		name, ok := d.plainString()
		if !ok {
			return 0, d.fail(reasonEnum)
		}
		n, known := e.byName[string(name)]
		if !known {
			return 0, d.fail(reasonEnum)
		}
		return n, true
	case c == 'n' && e.null:
		if !d.literal("null") {
			return 0, d.fail(reasonSyntax)
		}
		return 0, true
	case c == '-' || c >= '0' && c <= '9':
		if e.closed {
			return 0, d.fail(reasonEnum)
		}
		tok, ok := d.number()
		if !ok {
			return 0, d.fail(reasonNumber)
		}
		n, err := strconv.ParseInt(string(tok), 10, 32)
		if err != nil {
			return 0, d.fail(reasonNumber)
		}
		return int32(n), true
	}
	return 0, d.fail(reasonValue)
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

// finishLength completes a length-delimited value whose content of n bytes
// was written at dst[mark+room:], room bytes after a reserved length
// prefix at dst[mark:]: it writes the length there, moving the content
// down when its varint is shorter than room.
func finishLength(dst []byte, mark, room, n int) []byte {
	size := protowire.SizeVarint(uint64(n))
	if size < room {
		copy(dst[mark+size:], dst[mark+room:mark+room+n])
	}
	protowire.AppendVarint(dst[:mark], uint64(n))
	return dst[:mark+size+n]
}
