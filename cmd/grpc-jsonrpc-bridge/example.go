package main

import (
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// exampleParams is an example of the params of a call of md over HTTP, in
// protojson form, as the bridge accepts them: the request message with
// every field present and holding a placeholder of its type (or, for a
// client-streaming method, an array of one such message). Fields are in
// declaration order. Of each oneof only the first member is present, since
// two would be refused. A message field whose type is already being filled
// in (a recursive type) is cut off as {} (or [] when repeated).
func exampleParams(md protoreflect.MethodDescriptor) []byte {
	if md.IsStreamingClient() {
		b := append([]byte{'['}, appendExample(nil, md.Input(), nil)...)
		return append(b, ']')
	}
	return appendExample(nil, md.Input(), nil)
}

// appendExample appends the example of a message; path holds the messages
// being filled in around it.
func appendExample(b []byte, md protoreflect.MessageDescriptor, path []protoreflect.FullName) []byte {
	if wk, ok := wellKnownExample(md); ok {
		return append(b, wk...)
	}
	path = append(path, md.FullName())
	b = append(b, '{')
	fields := md.Fields()
	n := 0
	for i := range fields.Len() {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && od.Fields().Get(0) != fd {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendQuoted(b, fd.JSONName())
		b = append(b, ':')
		b = appendField(b, fd, path)
	}
	return append(b, '}')
}

// appendField appends the example value of a field: a list of one
// element, a map of one entry, or one value.
func appendField(b []byte, fd protoreflect.FieldDescriptor, path []protoreflect.FullName) []byte {
	switch {
	case fd.IsMap():
		if recursive(fd.MapValue(), path) {
			return append(b, "{}"...)
		}
		b = append(b, '{')
		b = appendQuoted(b, mapKeyExample(fd.MapKey().Kind()))
		b = append(b, ':')
		b = appendValue(b, fd.MapValue(), path)
		return append(b, '}')
	case fd.IsList():
		if recursive(fd, path) {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		b = appendValue(b, fd, path)
		return append(b, ']')
	case recursive(fd, path):
		return append(b, "{}"...)
	}
	return appendValue(b, fd, path)
}

// recursive reports whether fd holds a message being filled in already.
func recursive(fd protoreflect.FieldDescriptor, path []protoreflect.FullName) bool {
	return fd.Message() != nil && slices.Contains(path, fd.Message().FullName())
}

// appendValue appends the placeholder of one value of fd's type.
func appendValue(b []byte, fd protoreflect.FieldDescriptor, path []protoreflect.FullName) []byte {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return appendExample(b, fd.Message(), path)
	case protoreflect.EnumKind:
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			return append(b, "null"...)
		}
		return appendQuoted(b, string(fd.Enum().Values().Get(0).Name()))
	}
	return append(b, scalarExample(fd.Kind())...)
}

// scalarExample is the placeholder of a scalar kind as protojson writes
// it: 64-bit integers as strings, bytes as (empty) base64.
func scalarExample(k protoreflect.Kind) string {
	switch k {
	case protoreflect.BoolKind:
		return "false"
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return `"0"`
	case protoreflect.StringKind, protoreflect.BytesKind:
		return `""`
	}
	return "0" // 32-bit integers, floats
}

// mapKeyExample is the placeholder of a map key of kind k, as the JSON
// object key protojson writes.
func mapKeyExample(k protoreflect.Kind) string {
	switch k {
	case protoreflect.StringKind:
		return ""
	case protoreflect.BoolKind:
		return "false"
	}
	return "0"
}

// wellKnownExample is the placeholder of a well-known type with a JSON
// form of its own.
func wellKnownExample(md protoreflect.MessageDescriptor) (string, bool) {
	if md.ParentFile() == nil || md.ParentFile().Package() != "google.protobuf" {
		return "", false
	}
	switch md.Name() {
	case "Timestamp":
		return `"1970-01-01T00:00:00Z"`, true
	case "Duration":
		return `"0s"`, true
	case "FieldMask":
		return `""`, true
	case "Struct", "Empty":
		return "{}", true
	case "Value":
		return "null", true
	case "ListValue":
		return "[]", true
	case "Any":
		return `{"@type":"type.googleapis.com/google.protobuf.Empty"}`, true
	case "DoubleValue", "FloatValue", "Int32Value", "UInt32Value":
		return "0", true
	case "Int64Value", "UInt64Value":
		return `"0"`, true
	case "BoolValue":
		return "false", true
	case "StringValue", "BytesValue":
		return `""`, true
	}
	return "", false
}

// appendQuoted appends s as a JSON string; s is a protobuf name or a
// placeholder, which need no escaping.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
