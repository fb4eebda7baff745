package mapping

import (
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The fast path transcodes JSON params straight into protobuf wire bytes
// and wire bytes straight into JSON, without building a message. It covers
// what protojson does for scalars, strings, bytes, enums (by name, and by
// number in params), nested and recursive messages, repeated fields,
// oneofs, optional fields, maps, null, and the well-known types Timestamp,
// Duration, Struct, Value, ListValue, Empty and the nine wrappers.
//
// What it does not cover makes it give up, and the general path (protojson
// and dynamicpb) handles the call with the exact protojson behaviour and
// errors: a message type it has no form for (Any, FieldMask, extensions,
// groups, proto2 required fields, more than maxFastFields fields), and
// inputs that are rare or invalid (numbers of integer fields written with
// a fraction or an exponent, escapes in field names, an enum name protojson
// does not know, a singular field repeated on the wire, a value out of
// range...). Every give-up is counted by reason (Fallbacks). The fast path
// therefore never accepts what protojson refuses and never writes what
// protojson would not (fuzz_diff_test.go checks both).

// maxFastDepth bounds nesting on the fast path; deeper input takes the
// general path.
const maxFastDepth = 64

// maxFastFields bounds the fields of a message on the fast path, so that
// the set of fields seen fits in a small array.
const maxFastFields = 256

// wkt names the well-known types with their own JSON form.
type wkt uint8

const (
	wktNone wkt = iota
	wktTimestamp
	wktDuration
	wktWrapper
	wktStruct
	wktValue
	wktList
)

// plan is the prepared fast-path form of one message type.
type plan struct {
	desc   protoreflect.MessageDescriptor
	fields []field
	byName map[string]*field // JSON name and proto name
	byNum  []int16           // field number -> index in fields, -1 if none
	oneofs int
	wkt    wkt
	// inner is the value field of a wrapper, the fields field of a Struct
	// and the values field of a ListValue.
	inner *field
}

// field is the prepared form of one field.
type field struct {
	index    int
	num      protowire.Number
	kind     protoreflect.Kind
	list     bool
	presence bool   // explicit presence: optional, oneof member or message
	oneof    int    // index of its real oneof, or -1
	key      []byte // `"jsonName":` for output
	jsonName string
	wireType protowire.Type
	msg      *plan
	enum     *enumPlan
	// isMap marks a map field; mapKey and mapVal are the fields of its
	// entries (mapVal renders zero values: its presence is set).
	isMap          bool
	mapKey, mapVal *field
	// nullable is set for fields whose JSON null is a value, not "unset":
	// google.protobuf.Value and google.protobuf.NullValue.
	nullable bool
}

// enumPlan maps enum names to numbers and back.
type enumPlan struct {
	byName map[string]int32
	byNum  map[int32]string
	closed bool
	null   bool // google.protobuf.NullValue, written as null
}

// planner builds plans for a graph of message types, memoising them so that
// recursive types share one plan.
type planner struct {
	plans map[protoreflect.FullName]*plan
	bad   map[protoreflect.FullName]string // why a type has no plan
}

// newPlan returns the fast-path plan of md, or nil and the reason when md
// (or a message it contains) needs the general path.
func newPlan(md protoreflect.MessageDescriptor) (*plan, string) {
	p := &planner{plans: map[protoreflect.FullName]*plan{}, bad: map[protoreflect.FullName]string{}}
	if w := wellKnown(md.FullName()); w != wktNone {
		return nil, "the message is itself " + string(md.FullName())
	}
	root := p.build(md)
	// A message is usable only if every message reachable from it is.
	for changed := true; changed; {
		changed = false
		for name, pl := range p.plans {
			if p.bad[name] != "" {
				continue
			}
			for _, f := range pl.allFields() {
				if f.msg != nil && p.bad[f.msg.desc.FullName()] != "" {
					p.bad[name] = p.bad[f.msg.desc.FullName()]
					changed = true
					break
				}
			}
		}
	}
	if why := p.bad[md.FullName()]; root == nil || why != "" {
		return nil, why
	}
	return root, ""
}

// allFields lists the fields of pl and of its map entries.
func (pl *plan) allFields() []*field {
	out := make([]*field, 0, len(pl.fields))
	for i := range pl.fields {
		f := &pl.fields[i]
		out = append(out, f)
		if f.isMap {
			out = append(out, f.mapKey, f.mapVal)
		}
	}
	return out
}

// wellKnown returns the JSON form of the message type name.
func wellKnown(name protoreflect.FullName) wkt {
	switch name {
	case "google.protobuf.Timestamp":
		return wktTimestamp
	case "google.protobuf.Duration":
		return wktDuration
	case "google.protobuf.Struct":
		return wktStruct
	case "google.protobuf.Value":
		return wktValue
	case "google.protobuf.ListValue":
		return wktList
	}
	if isWrapper(name) {
		return wktWrapper
	}
	return wktNone
}

func (p *planner) build(md protoreflect.MessageDescriptor) *plan {
	if pl, ok := p.plans[md.FullName()]; ok {
		return pl
	}
	pl := &plan{desc: md, byName: map[string]*field{}, wkt: wellKnown(md.FullName())}
	p.plans[md.FullName()] = pl
	fds := md.Fields()
	name := string(md.FullName())
	switch {
	case name == "google.protobuf.Any":
		p.bad[md.FullName()] = "google.protobuf.Any (its type is resolved at run time)"
		return pl
	case name == "google.protobuf.FieldMask":
		p.bad[md.FullName()] = "google.protobuf.FieldMask"
		return pl
	case pl.wkt == wktNone && name != "google.protobuf.Empty" && len(name) > 16 && name[:16] == "google.protobuf.":
		p.bad[md.FullName()] = name
		return pl
	case fds.Len() > maxFastFields:
		p.bad[md.FullName()] = name + " has more than " + strconv.Itoa(maxFastFields) + " fields"
		return pl
	case md.ExtensionRanges().Len() > 0:
		p.bad[md.FullName()] = name + " has extensions"
		return pl
	}
	maxNum := 0
	for i := range fds.Len() {
		maxNum = max(maxNum, int(fds.Get(i).Number()))
	}
	if maxNum > 4*maxFastFields {
		p.bad[md.FullName()] = name + " has field numbers above " + strconv.Itoa(4*maxFastFields)
		return pl
	}
	pl.byNum = make([]int16, maxNum+1)
	for i := range pl.byNum {
		pl.byNum[i] = -1
	}
	pl.oneofs = md.Oneofs().Len()
	pl.fields = make([]field, fds.Len())
	for i := range fds.Len() {
		fd := fds.Get(i)
		if why := p.unsupported(fd); why != "" {
			p.bad[md.FullName()] = why
			return pl
		}
		f := &pl.fields[i]
		p.fill(f, fd)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			f.oneof = od.Index()
		}
		if fd.IsMap() {
			f.isMap = true
			f.mapKey, f.mapVal = new(field), new(field)
			p.fill(f.mapKey, fd.MapKey())
			p.fill(f.mapVal, fd.MapValue())
			f.mapKey.presence, f.mapVal.presence = true, true
			if why := p.unsupported(fd.MapValue()); why != "" {
				p.bad[md.FullName()] = why
				return pl
			}
		}
		pl.byNum[fd.Number()] = int16(i)
		pl.byName[fd.JSONName()] = f
		pl.byName[string(fd.Name())] = f
	}
	switch pl.wkt {
	case wktWrapper, wktStruct, wktList:
		pl.inner = pl.fieldByNum(1)
		if pl.inner == nil {
			p.bad[md.FullName()] = name + " without field 1"
		}
	}
	return pl
}

// unsupported says why the fast path cannot take fd, or "".
func (p *planner) unsupported(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsExtension():
		return "extension " + string(fd.FullName())
	case fd.Cardinality() == protoreflect.Required:
		return "proto2 required field " + string(fd.FullName())
	case fd.Kind() == protoreflect.GroupKind:
		return "group " + string(fd.FullName())
	}
	return ""
}

// fill prepares f from fd.
func (p *planner) fill(f *field, fd protoreflect.FieldDescriptor) {
	*f = field{
		index:    fd.Index(),
		num:      fd.Number(),
		kind:     fd.Kind(),
		list:     fd.IsList(),
		presence: fd.HasPresence(),
		oneof:    -1,
		key:      append(strconv.AppendQuote(nil, fd.JSONName()), ':'),
		jsonName: fd.JSONName(),
		wireType: wireType(fd.Kind()),
	}
	switch fd.Kind() {
	case protoreflect.MessageKind:
		if fd.IsMap() { // its entries have mapKey and mapVal instead
			break
		}
		f.msg = p.build(fd.Message())
		f.nullable = f.msg.wkt == wktValue
	case protoreflect.EnumKind:
		f.enum = newEnumPlan(fd.Enum())
		f.nullable = f.enum.null
	}
}

func newEnumPlan(ed protoreflect.EnumDescriptor) *enumPlan {
	vs := ed.Values()
	e := &enumPlan{byName: make(map[string]int32, vs.Len()), byNum: make(map[int32]string, vs.Len()), closed: ed.IsClosed(),
		null: ed.FullName() == "google.protobuf.NullValue"}
	for i := range vs.Len() {
		v := vs.Get(i)
		e.byName[string(v.Name())] = int32(v.Number())
		if _, dup := e.byNum[int32(v.Number())]; !dup {
			e.byNum[int32(v.Number())] = string(v.Name())
		}
	}
	return e
}

// wireType is the wire type of a singular value of kind k.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind,
		protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	}
	return protowire.BytesType
}

// fieldByNum returns the field numbered n, or nil.
func (pl *plan) fieldByNum(n protowire.Number) *field {
	if n <= 0 || int(n) >= len(pl.byNum) {
		return nil
	}
	if i := pl.byNum[n]; i >= 0 {
		return &pl.fields[i]
	}
	return nil
}

// bitset is a small set of field or oneof indexes.
type bitset [maxFastFields / 64]uint64

func (s *bitset) testAndSet(i int) bool {
	w, b := i/64, uint64(1)<<(i%64)
	had := s[w]&b != 0
	s[w] |= b
	return had
}
