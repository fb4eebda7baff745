package mapping

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The fast path transcodes JSON params straight into protobuf wire bytes
// and wire bytes straight into JSON, without building a message. It covers
// the plain part of protojson: scalars, strings, bytes, enums by name,
// nested and recursive messages, repeated fields, oneofs and optional
// fields. Anything else (maps, well-known types, proto2 required fields,
// null, numbers written as floats or with exponents, escapes in field
// names, non-contiguous repeated fields on the wire...) makes the fast path
// give up, and the general path (protojson and dynamicpb) handles the call
// with the exact protojson behaviour and errors. The fast path therefore
// never accepts what protojson refuses and never writes what protojson
// would not.

// maxFastDepth bounds nesting on the fast path; deeper input takes the
// general path.
const maxFastDepth = 64

// maxFastFields bounds the fields of a message on the fast path, so that
// the set of fields seen fits in a small array.
const maxFastFields = 256

// plan is the prepared fast-path form of one message type.
type plan struct {
	desc   protoreflect.MessageDescriptor
	fields []field
	byName map[string]*field // JSON name and proto name
	byNum  []int16           // field number -> index in fields, -1 if none
	oneofs int
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
	wireType protowire.Type
	msg      *plan
	enum     *enumPlan
}

// enumPlan maps enum names to numbers and back.
type enumPlan struct {
	byName map[string]int32
	byNum  map[int32]string
	closed bool
}

// planner builds plans for a graph of message types, memoising them so that
// recursive types share one plan.
type planner struct {
	plans map[protoreflect.FullName]*plan
	bad   map[protoreflect.FullName]bool
}

// newPlan returns the fast-path plan of md, or nil when md (or a message it
// contains) needs the general path.
func newPlan(md protoreflect.MessageDescriptor) *plan {
	p := &planner{plans: map[protoreflect.FullName]*plan{}, bad: map[protoreflect.FullName]bool{}}
	root := p.build(md)
	// A message is usable only if every message reachable from it is.
	for changed := true; changed; {
		changed = false
		for name, pl := range p.plans {
			if p.bad[name] {
				continue
			}
			for _, f := range pl.fields {
				if f.msg != nil && p.bad[f.msg.desc.FullName()] {
					p.bad[name] = true
					changed = true
					break
				}
			}
		}
	}
	if root == nil || p.bad[md.FullName()] {
		return nil
	}
	return root
}

func (p *planner) build(md protoreflect.MessageDescriptor) *plan {
	if pl, ok := p.plans[md.FullName()]; ok {
		return pl
	}
	pl := &plan{desc: md, byName: map[string]*field{}}
	p.plans[md.FullName()] = pl
	fds := md.Fields()
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") || fds.Len() > maxFastFields || md.ExtensionRanges().Len() > 0 {
		p.bad[md.FullName()] = true
		return pl
	}
	maxNum := 0
	for i := range fds.Len() {
		maxNum = max(maxNum, int(fds.Get(i).Number()))
	}
	if maxNum > 4*maxFastFields {
		p.bad[md.FullName()] = true
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
		if fd.IsMap() || fd.IsExtension() || fd.Cardinality() == protoreflect.Required || fd.Kind() == protoreflect.GroupKind {
			p.bad[md.FullName()] = true
			return pl
		}
		f := &pl.fields[i]
		*f = field{
			index:    i,
			num:      fd.Number(),
			kind:     fd.Kind(),
			list:     fd.IsList(),
			presence: fd.HasPresence(),
			oneof:    -1,
			key:      append(strconv.AppendQuote(nil, fd.JSONName()), ':'),
			wireType: wireType(fd.Kind()),
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			f.oneof = od.Index()
		}
		switch fd.Kind() {
		case protoreflect.MessageKind:
			f.msg = p.build(fd.Message())
		case protoreflect.EnumKind:
			f.enum = newEnumPlan(fd.Enum())
		}
		pl.byNum[fd.Number()] = int16(i)
		pl.byName[fd.JSONName()] = f
		pl.byName[string(fd.Name())] = f
	}
	return pl
}

func newEnumPlan(ed protoreflect.EnumDescriptor) *enumPlan {
	vs := ed.Values()
	e := &enumPlan{byName: make(map[string]int32, vs.Len()), byNum: make(map[int32]string, vs.Len()), closed: ed.IsClosed()}
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
