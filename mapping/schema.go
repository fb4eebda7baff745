package mapping

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// object is a JSON object of the document. encoding/json writes map keys
// sorted, which keeps the document deterministic.
type object = map[string]any

// direction tells which side of the protojson mapping a schema describes:
// what the bridge accepts in params, or what it sends in results.
type direction int

const (
	output direction = iota // results: what protojson writes
	input                   // params: what protojson reads
)

// InputSuffix ends the component name of every schema that describes
// params (what the bridge accepts) rather than results (what it sends):
// "demo.v1.Note" is a result, "demo.v1.Note-input" a param. A hyphen
// cannot appear in a protobuf name, so the two never clash.
const InputSuffix = "-input"

// schemaRefPrefix starts every $ref into components.schemas.
const schemaRefPrefix = "#/components/schemas/"

// Patterns of the strings protojson reads and writes.
const (
	// patternIntString is a decimal integer as protojson writes 64-bit
	// integers.
	patternIntString  = `^-?(0|[1-9][0-9]*)$`
	patternUintString = `^(0|[1-9][0-9]*)$`
	// patternIntInput is a JSON number literal with an integral value, as
	// protojson reads integers from strings: no fraction, a fraction of
	// zeros, or an exponent (whose integrality a pattern cannot check).
	patternIntInput = `^-?(0|[1-9][0-9]*)((\.0+)?|(\.[0-9]+)?[eE][+-]?[0-9]+)$`
	// patternNumberInput is any JSON number literal, as protojson reads
	// floats from strings.
	patternNumberInput = `^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`
	// Map keys: protojson writes integers in decimal and reads them with
	// strconv.ParseInt / ParseUint.
	patternKeyIntInput  = `^[+-]?[0-9]+$`
	patternKeyUintInput = `^[0-9]+$`
	patternBase64Output = `^[A-Za-z0-9+/]*={0,2}$`
	// patternBase64Input accepts standard and URL-safe base64, padded or not.
	patternBase64Input = `^[A-Za-z0-9+/_-]*={0,2}$`
	patternTimestamp   = `^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$`
	patternDurationOut = `^-?[0-9]+(\.[0-9]{3}|\.[0-9]{6}|\.[0-9]{9})?s$`
	patternDurationIn  = `^[+-]?([0-9]+(\.[0-9]{0,9})?|\.[0-9]{1,9})s$`
)

// Number bounds. The float bound is halfway between the largest float32
// and the next power of two: strconv.ParseFloat(s, 32) rounds anything
// below it to math.MaxFloat32 and fails from it on.
const (
	maxInt32      = "2147483647"
	minInt32      = "-2147483648"
	maxUint32     = "4294967295"
	maxInt64      = "9223372036854775807"
	minInt64      = "-9223372036854775808"
	maxUint64     = "18446744073709551615"
	float32Limit  = "340282356779733661637539395458142568448"
	float32NLimit = "-340282356779733661637539395458142568448"
)

// specialFloats are the strings protojson uses for non-finite floats.
var specialFloats = []any{"NaN", "Infinity", "-Infinity"}

// schemas builds the components.schemas of one document. Every message and
// enum is described once per direction and referenced with $ref; a
// recursive message, and one that holds it, once per level (see ref).
type schemas struct {
	emitUnpopulated bool
	defs            object   // component name -> schema
	errorRefs       []object // every method's errors, shared by all of them

	level  int                            // of the schemas being built: 1, or deeper inside a recursive message
	cyclic map[protoreflect.FullName]bool // whether a message reaches a recursive one
}

func newSchemas(emitUnpopulated bool) *schemas {
	return &schemas{emitUnpopulated: emitUnpopulated, defs: object{}, errorRefs: errorRefs(), level: 1,
		cyclic: map[protoreflect.FullName]bool{}}
}

// maxRecursion is how many levels of a recursive message (one inside
// itself, directly or through others) the document describes; deeper, it
// is any object.
const maxRecursion = 4

// componentName is the components.schemas key of a message or enum.
func componentName(d protoreflect.Descriptor, dir direction) string {
	if dir == input {
		return string(d.FullName()) + InputSuffix
	}
	return string(d.FullName())
}

// ref returns {"$ref": ...} to the schema of a message or enum, adding the
// schema to the components first if it is not there yet.
//
// The document has no $ref cycle, on which some OpenRPC tools loop
// forever (@open-rpc/schema-utils-js's dereferencer among them): inside
// the schema of a message being described, a reference to that message
// (recursion, direct or through others) goes to a copy of its schema one
// level deeper, named with the level ("test.v1.Tree-2"), and so on down to
// maxRecursion levels, below which the message is any object. Messages
// that reach a recursive one are described per level the same way; the
// others once.
func (s *schemas) ref(d protoreflect.Descriptor, dir direction) object {
	name := componentName(d, dir)
	md, isMessage := d.(protoreflect.MessageDescriptor)
	if isMessage && s.reachesCycle(md) && s.level > 1 {
		name += "-" + strconv.Itoa(s.level)
	}
	if sch, ok := s.defs[name]; ok && sch == nil { // md inside itself
		if s.level >= maxRecursion {
			return object{"type": "object", "description": "A " + string(d.FullName()) + ", " + strconv.Itoa(maxRecursion) +
				" levels inside itself: the document describes no deeper level."}
		}
		s.level++
		defer func() { s.level-- }()
		return s.ref(d, dir)
	}
	if _, ok := s.defs[name]; !ok {
		s.defs[name] = nil // placeholder: a recursive reference stops here
		switch d := d.(type) {
		case protoreflect.MessageDescriptor:
			s.defs[name] = s.message(d, dir)
		case protoreflect.EnumDescriptor:
			s.defs[name] = enumSchema(d, dir)
		}
	}
	return object{"$ref": schemaRefPrefix + name}
}

// reachesCycle tells whether a message-typed path from md leads back to a
// message on it: md is recursive, or holds one. The well-known types are
// described inline and do not count.
func (s *schemas) reachesCycle(md protoreflect.MessageDescriptor) bool {
	if v, ok := s.cyclic[md.FullName()]; ok {
		return v
	}
	onPath := map[protoreflect.FullName]bool{}
	var walk func(m protoreflect.MessageDescriptor) bool
	walk = func(m protoreflect.MessageDescriptor) bool {
		if m.ParentFile() != nil && strings.HasPrefix(string(m.FullName()), "google.protobuf.") {
			return false
		}
		if onPath[m.FullName()] {
			return true
		}
		if v, ok := s.cyclic[m.FullName()]; ok && !v {
			return false
		}
		onPath[m.FullName()] = true
		defer delete(onPath, m.FullName())
		fields := m.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			if sub := fd.Message(); sub != nil && walk(sub) {
				return true
			}
		}
		return false
	}
	v := walk(md)
	s.cyclic[md.FullName()] = v
	return v
}

// field returns the schema of a field as it appears in a message of the
// given direction, with its comment and deprecation.
func (s *schemas) field(fd protoreflect.FieldDescriptor, dir direction) object {
	sch := s.fieldValue(fd, dir)
	if desc := comments(fd); desc != "" {
		sch = describe(sch, desc)
	}
	if isDeprecated(fd) {
		sch = withKey(sch, "deprecated", true)
	}
	return sch
}

// fieldValue returns the schema of a field's value: scalars inline,
// messages and enums by $ref, null allowed where protojson allows it.
func (s *schemas) fieldValue(fd protoreflect.FieldDescriptor, dir direction) object {
	var sch object
	switch {
	case fd.IsMap():
		sch = s.mapSchema(fd, dir)
	case fd.IsList():
		sch = object{"type": "array", "items": s.singular(fd, dir)}
	default:
		sch = s.singular(fd, dir)
	}
	if s.nullable(fd, dir) {
		sch = nullable(sch)
	}
	return sch
}

// nullable reports whether the field may be JSON null. protojson reads null
// for any field as "not set" (a proto2 required field is then missing), and
// writes null for an unset singular message field when it emits unpopulated
// fields.
func (s *schemas) nullable(fd protoreflect.FieldDescriptor, dir direction) bool {
	if isValueMessage(fd) || isNullEnum(fd) {
		return false // their schemas already say null
	}
	if dir == input {
		return fd.Cardinality() != protoreflect.Required
	}
	return s.emitUnpopulated && fd.Message() != nil && !fd.IsList() && !fd.IsMap() && fd.ContainingOneof() == nil
}

// mapSchema describes a map field: a JSON object whose keys are the map
// keys written as strings.
func (s *schemas) mapSchema(fd protoreflect.FieldDescriptor, dir direction) object {
	sch := object{"type": "object", "additionalProperties": s.singular(fd.MapValue(), dir)}
	if names := keySchema(fd.MapKey().Kind(), dir); names != nil {
		sch["propertyNames"] = names
	}
	return sch
}

// keySchema constrains the keys of a map by the key's kind; nil for strings.
func keySchema(k protoreflect.Kind, dir direction) object {
	switch k {
	case protoreflect.BoolKind:
		return object{"enum": []any{"true", "false"}}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if dir == input {
			return object{"pattern": patternKeyIntInput}
		}
		return object{"pattern": patternIntString}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if dir == input {
			return object{"pattern": patternKeyUintInput}
		}
		return object{"pattern": patternUintString}
	}
	return nil
}

// singular describes one value of the field's type, ignoring cardinality.
func (s *schemas) singular(fd protoreflect.FieldDescriptor, dir direction) object {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return s.ref(fd.Message(), dir)
	case protoreflect.EnumKind:
		if isNullEnum(fd) {
			return nullValueSchema(dir)
		}
		return s.ref(fd.Enum(), dir)
	}
	return scalarSchema(fd.Kind(), dir)
}

// scalarSchema describes a scalar kind in protojson.
func scalarSchema(k protoreflect.Kind, dir direction) object {
	switch k {
	case protoreflect.BoolKind:
		return object{"type": "boolean"}
	case protoreflect.StringKind:
		return object{"type": "string"}
	case protoreflect.BytesKind:
		if dir == input {
			return object{"type": "string", "contentEncoding": "base64", "pattern": patternBase64Input}
		}
		return object{"type": "string", "contentEncoding": "base64", "pattern": patternBase64Output}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return int32Schema(minInt32, maxInt32, "An int32", dir)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return int32Schema("0", maxUint32, "A uint32", dir)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return int64Schema(minInt64, maxInt64, patternIntString, "An int64", dir)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return int64Schema("0", maxUint64, patternUintString, "A uint64", dir)
	case protoreflect.FloatKind:
		return floatSchema("A float", dir)
	case protoreflect.DoubleKind:
		return floatSchema("A double", dir)
	}
	return object{}
}

// The numeric schemas name their protobuf type in their description, not
// in "format": int32, int64, float and the like are not formats of JSON
// Schema, and strict validators (ajv, which @open-rpc/schema-utils-js
// uses) refuse a schema with a format they do not know. The bounds and
// patterns carry the rest.

// int32Schema: protojson writes a JSON number and reads a number or a
// string holding one.
func int32Schema(lo, hi, typ string, dir direction) object {
	if dir == input {
		return object{"type": []any{"integer", "string"}, "description": typ + ": an integer, or a string holding one.",
			"minimum": json.Number(lo), "maximum": json.Number(hi), "pattern": patternIntInput}
	}
	return object{"type": "integer", "description": typ + ".", "minimum": json.Number(lo), "maximum": json.Number(hi)}
}

// int64Schema: protojson writes a decimal string and reads a number or a
// string holding one.
func int64Schema(lo, hi, pattern, typ string, dir direction) object {
	if dir == input {
		desc := typ + ": an integer, or a string holding one; results write it as a decimal string."
		return object{"type": []any{"integer", "string"}, "description": desc,
			"minimum": json.Number(lo), "maximum": json.Number(hi), "pattern": patternIntInput}
	}
	return object{"type": "string", "description": typ + " as a decimal string (protojson writes 64-bit integers as strings).",
		"pattern": pattern}
}

// floatSchema: protojson writes a number, or "NaN", "Infinity" and
// "-Infinity"; it reads those and numbers written as strings.
func floatSchema(typ string, dir direction) object {
	num := object{"type": "number"}
	desc := typ + `: a number, or "NaN", "Infinity" or "-Infinity".`
	if typ == "A float" && dir == input {
		num["exclusiveMinimum"] = json.Number(float32NLimit)
		num["exclusiveMaximum"] = json.Number(float32Limit)
	}
	alts := []any{num, object{"type": "string", "enum": specialFloats}}
	if dir == input {
		alts = append(alts, object{"type": "string", "pattern": patternNumberInput})
		desc = typ + `: a number, a string holding one, or "NaN", "Infinity" or "-Infinity".`
	}
	return object{"anyOf": alts, "description": desc}
}

// enumSchema describes an enum: its value names, and in params its numbers
// too. Results of an open enum carry a number for a value the descriptor
// does not name.
func enumSchema(ed protoreflect.EnumDescriptor, dir direction) object {
	vals := ed.Values()
	names := make([]any, vals.Len())
	for i := range vals.Len() {
		names[i] = string(vals.Get(i).Name())
	}
	named := object{"type": "string", "enum": names}
	number := object{"type": "integer", "minimum": json.Number(minInt32), "maximum": json.Number(maxInt32)}
	var sch object
	switch {
	case dir == input:
		number["description"] = "The number of a value, which protojson accepts as well as its name."
		sch = object{"anyOf": []any{named, number}}
	case !ed.IsClosed():
		number["description"] = "The number of a value this document does not name."
		sch = object{"anyOf": []any{named, number}}
	default:
		sch = named
	}
	sch["title"] = string(ed.FullName())
	if desc := comments(ed); desc != "" {
		sch["description"] = desc
	}
	return sch
}

// nullValueSchema describes google.protobuf.NullValue, written as null.
func nullValueSchema(dir direction) object {
	if dir == input {
		return object{"anyOf": []any{object{"type": "null"}, object{"type": "string", "enum": []any{"NULL_VALUE"}}, object{"type": "integer", "enum": []any{0}}}}
	}
	return object{"type": "null"}
}

// message describes a message: a well-known type by its special JSON form,
// any other as an object of its fields by JSON name (and, in params, by
// proto name too).
func (s *schemas) message(md protoreflect.MessageDescriptor, dir direction) object {
	if sch := s.wellKnown(md, dir); sch != nil {
		sch["title"] = string(md.FullName())
		return sch
	}
	fields := md.Fields()
	props := object{}
	var required []string
	var notBoth []any // in params: a field given under both of its names
	for i := range fields.Len() {
		fd := fields.Get(i)
		sch := s.field(fd, dir)
		props[fd.JSONName()] = sch
		if s.required(fd, dir) {
			required = append(required, fd.JSONName())
		}
		if dir == input && fd.TextName() != fd.JSONName() {
			alias := "The proto name of " + fd.JSONName() + "; give one of the two."
			props[fd.TextName()] = withDescription(sch, joinText(alias, ownDescription(s.fieldValue(fd, dir))))
			notBoth = append(notBoth, object{"required": []any{fd.JSONName(), fd.TextName()}})
		}
	}
	sch := object{
		"title":                string(md.FullName()),
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if md.ExtensionRanges().Len() > 0 {
		sch["patternProperties"] = object{`^\[.+\]$`: object{"description": "An extension field, by its full name in brackets."}}
	}
	if desc := comments(md); desc != "" {
		sch["description"] = desc
	}
	if len(required) > 0 {
		sch["required"] = required
	}
	var all []any
	if len(notBoth) > 0 {
		all = append(all, object{"not": object{"anyOf": notBoth}})
	}
	all = append(all, s.oneofs(md, dir)...)
	if len(all) > 0 {
		sch["allOf"] = all
	}
	return sch
}

// required reports whether a field must be present: a proto2 required
// field always (protojson refuses a message without it and never writes
// one without it), a field marked REQUIRED by google.api.field_behavior in
// params, and, when results emit unpopulated fields, every field outside a
// oneof in results.
func (s *schemas) required(fd protoreflect.FieldDescriptor, dir direction) bool {
	if fd.Cardinality() == protoreflect.Required {
		return true
	}
	if dir == input {
		return IsFieldRequired(fd)
	}
	return s.emitUnpopulated && fd.ContainingOneof() == nil
}

// oneofs says, for every real oneof of md, that at most one member is set:
// exactly one of "member i is set" (for each i) and "no member is set"
// holds. In params a member given as null is not set.
func (s *schemas) oneofs(md protoreflect.MessageDescriptor, dir direction) []any {
	var out []any
	oneofs := md.Oneofs()
	for i := range oneofs.Len() {
		od := oneofs.Get(i)
		if od.IsSynthetic() || od.Fields().Len() < 2 {
			continue
		}
		var set []any
		for j := range od.Fields().Len() {
			set = append(set, memberSet(od.Fields().Get(j), dir))
		}
		alts := append(slices.Clone(set), object{"not": object{"anyOf": set}})
		out = append(out, object{
			"description": "At most one member of oneof " + string(od.Name()) + " is set.",
			"oneOf":       alts,
		})
	}
	return out
}

// memberSet is a schema that holds when the oneof member fd is set.
func memberSet(fd protoreflect.FieldDescriptor, dir direction) any {
	present := func(name string) object {
		if dir == input && !isValueMessage(fd) && !isNullEnum(fd) {
			return object{"required": []any{name}, "properties": object{name: object{"not": object{"type": "null"}}}}
		}
		return object{"required": []any{name}}
	}
	if dir == input && fd.TextName() != fd.JSONName() {
		return object{"anyOf": []any{present(fd.JSONName()), present(fd.TextName())}}
	}
	return present(fd.JSONName())
}

// wellKnown returns the schema of a well-known type with a special JSON
// form, or nil for any other message.
func (s *schemas) wellKnown(md protoreflect.MessageDescriptor, dir direction) object {
	if md.ParentFile() == nil || md.ParentFile().Package() != "google.protobuf" {
		return nil
	}
	switch md.Name() {
	case "Timestamp":
		return object{"type": "string", "format": "date-time", "pattern": patternTimestamp,
			"description": "An RFC 3339 date and time, such as \"2024-05-01T12:00:00Z\"."}
	case "Duration":
		p := patternDurationOut
		if dir == input {
			p = patternDurationIn
		}
		return object{"type": "string", "pattern": p,
			"description": "Seconds with up to nine fractional digits and the suffix s, such as \"1.5s\"."}
	case "FieldMask":
		return object{"type": "string",
			"description": "Field paths in lowerCamelCase separated by commas, such as \"title,createdAt\"."}
	case "Struct":
		return object{"type": "object", "description": "Any JSON object."}
	case "ListValue":
		return object{"type": "array", "description": "Any JSON array."}
	case "Value":
		return object{"description": "Any JSON value."}
	case "Empty":
		return object{"type": "object", "properties": object{}, "additionalProperties": false}
	case "Any":
		return object{
			"type":        "object",
			"description": "A message of any type: its JSON fields, or \"value\" for a well-known type, beside \"@type\", the type URL. An empty object is an empty Any.",
			"properties":  object{"@type": object{"type": "string"}},
			"anyOf":       []any{object{"maxProperties": 0}, object{"required": []any{"@type"}}},
		}
	case "DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value",
		"BoolValue", "StringValue", "BytesValue":
		return wrapperSchema(md, dir)
	}
	return nil
}

// wrapperSchema describes a wrapper type: the JSON of its value. An unset
// wrapper field is left out, or null where null is allowed.
func wrapperSchema(md protoreflect.MessageDescriptor, dir direction) object {
	fd := md.Fields().ByName("value")
	if fd == nil {
		return nil
	}
	sch := scalarSchema(fd.Kind(), dir)
	sch["description"] = joinText("The wrapped "+strings.ToLower(fd.Kind().String())+" value itself.", ownDescription(sch))
	return sch
}

// nullable returns a schema that also allows null.
func nullable(sch object) object {
	if _, isRef := sch["$ref"]; !isRef {
		switch t := sch["type"].(type) {
		case string:
			sch["type"] = []any{t, "null"}
			return sch
		case []any:
			sch["type"] = append(t, "null")
			return sch
		case nil:
			if alts, ok := sch["anyOf"].([]any); ok { // a float: one more alternative
				sch = cloneObject(sch)
				sch["anyOf"] = append(slices.Clone(alts), object{"type": "null"})
				return sch
			}
		}
	}
	return object{"anyOf": []any{sch, object{"type": "null"}}}
}

// describe returns sch with desc as its description, followed by the
// description sch has of its own (a scalar's type).
func describe(sch object, desc string) object {
	return withDescription(sch, joinText(desc, ownDescription(sch)))
}

// ownDescription is the description of sch itself, "" for a $ref (whose
// description is in the component).
func ownDescription(sch object) string {
	if _, isRef := sch["$ref"]; isRef {
		return ""
	}
	d, _ := sch["description"].(string)
	return d
}

// withDescription returns sch with a description. A bare $ref cannot carry
// siblings in draft-07, so it is wrapped in allOf.
func withDescription(sch object, desc string) object {
	return withKey(sch, "description", desc)
}

func withKey(sch object, key string, v any) object {
	if _, isRef := sch["$ref"]; isRef {
		sch = object{"allOf": []any{sch}}
	} else {
		sch = cloneObject(sch)
	}
	sch[key] = v
	return sch
}

// cloneObject copies the top level of sch.
func cloneObject(sch object) object {
	out := make(object, len(sch)+1)
	for k, v := range sch {
		out[k] = v
	}
	return out
}
