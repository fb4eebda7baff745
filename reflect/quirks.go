package reflect

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// wellKnownPath returns the path of the bridge's own file declaring the
// message or enum name, when it is a well-known type's (of a
// google/protobuf/*.proto file), or "".
func wellKnownPath(name protoreflect.FullName) string {
	if !strings.HasPrefix(string(name), "google.protobuf.") {
		return ""
	}
	desc, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return ""
	}
	switch desc.(type) {
	case protoreflect.MessageDescriptor, protoreflect.EnumDescriptor:
	default:
		return ""
	}
	if path := desc.ParentFile().Path(); strings.HasPrefix(path, wellKnownPrefix) {
		return path
	}
	return ""
}

// wellKnownOf sorts out a file the backend gave: own lists the bridge's
// files standing for what it declares of the well-known types, rest is
// what remains of it to describe (nil when nothing does). A file at the
// path of one of the bridge's own (google/protobuf/struct.proto) is that
// file; the messages and enums of the bridge's well-known types are taken
// out of any other file of package google.protobuf, as @grpc/reflection
// 1.0.4 serves them all in one "google_protobuf.proto" whose
// google.protobuf.Struct protobuf-go refuses. Either way they are the
// same messages on the wire; what else such a file declares stays.
func wellKnownOf(fdp *descriptorpb.FileDescriptorProto) (own []string, rest *descriptorpb.FileDescriptorProto) {
	path := fdp.GetName()
	if strings.HasPrefix(path, wellKnownPrefix) {
		if _, err := protoregistry.GlobalFiles.FindFileByPath(path); err == nil {
			return []string{path}, nil
		}
	}
	pkg := fdp.GetPackage()
	if pkg != "google.protobuf" {
		return nil, fdp
	}
	take := func(name string) bool {
		p := wellKnownPath(join(protoreflect.FullName(pkg), name))
		if p != "" && !slices.Contains(own, p) {
			own = append(own, p)
		}
		return p != ""
	}
	messages := slices.DeleteFunc(slices.Clone(fdp.GetMessageType()), func(m *descriptorpb.DescriptorProto) bool { return take(m.GetName()) })
	enums := slices.DeleteFunc(slices.Clone(fdp.GetEnumType()), func(e *descriptorpb.EnumDescriptorProto) bool { return take(e.GetName()) })
	if len(own) == 0 {
		return nil, fdp
	}
	slices.Sort(own)
	if len(messages) == 0 && len(enums) == 0 && len(fdp.GetExtension()) == 0 && len(fdp.GetService()) == 0 {
		return own, nil
	}
	fdp.MessageType, fdp.EnumType = messages, enums
	return own, fdp
}

// mapEntryName is the name protobuf gives the entry message of map field
// name: CamelCase(name) + "Entry", as protoc and protobuf-go derive it.
func mapEntryName(name string) string {
	var b []byte
	upperNext := true
	for _, c := range name {
		switch {
		case c == '_':
			upperNext = true
		case upperNext:
			b = append(b, byte(unicode.ToUpper(c)))
			upperNext = false
		default:
			b = append(b, byte(c))
		}
	}
	return string(append(b, "Entry"...))
}

// renameMapEntries gives the map entry messages of fdp (options.map_entry)
// the name protobuf derives from their field when they have another, as
// @grpc/reflection 1.0.4 names them after the field ("M_string_int64",
// "Fields"); the type names referring to them, which repair made full,
// follow. An entry is renamed only when it looks like one (nested in the
// message of the one repeated field using it, declaring nothing) and its
// new name is free; what is left is protodesc's to judge. Names and
// numbers of fields do not change, nor does the wire format. It returns
// the renamings, "old → new".
func renameMapEntries(fdp *descriptorpb.FileDescriptorProto) []string {
	taken := allNames(fdp)
	renames := make(map[string]string) // full names, with a leading dot
	var done []string
	var message func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto)
	message = func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto) {
		name := join(scope, m.GetName())
		users := make(map[string][]*descriptorpb.FieldDescriptorProto) // entry's full name → fields using it
		for _, f := range m.GetField() {
			users[f.GetTypeName()] = append(users[f.GetTypeName()], f)
		}
		for _, n := range m.GetNestedType() {
			if !n.GetOptions().GetMapEntry() || len(n.GetNestedType())+len(n.GetEnumType())+len(n.GetExtension()) > 0 {
				continue
			}
			old := join(name, n.GetName())
			fields := users["."+string(old)]
			if len(fields) != 1 || fields[0].GetLabel() != descriptorpb.FieldDescriptorProto_LABEL_REPEATED {
				continue
			}
			want := mapEntryName(fields[0].GetName())
			renamed := join(name, want)
			if want == n.GetName() || !protoreflect.Name(want).IsValid() || taken[renamed] {
				continue
			}
			n.Name = proto.String(want)
			taken[renamed] = true
			renames["."+string(old)] = "." + string(renamed)
			done = append(done, string(old)+" → "+want)
		}
		for _, n := range m.GetNestedType() {
			message(name, n)
		}
	}
	for _, m := range fdp.GetMessageType() {
		message(protoreflect.FullName(fdp.GetPackage()), m)
	}
	if len(renames) == 0 {
		return nil
	}
	for _, ref := range references(fdp) {
		if to, ok := renames[ref.name()]; ok {
			ref.set(to)
		}
	}
	return done
}

// allNames returns every full name fdp declares: messages, enums and
// their values, fields, oneofs, extensions, services and methods.
func allNames(fdp *descriptorpb.FileDescriptorProto) map[protoreflect.FullName]bool {
	names := make(map[protoreflect.FullName]bool)
	enum := func(scope protoreflect.FullName, e *descriptorpb.EnumDescriptorProto) {
		names[join(scope, e.GetName())] = true
		for _, v := range e.GetValue() {
			names[join(scope, v.GetName())] = true // values are the enum's siblings
		}
	}
	var message func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto)
	message = func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto) {
		name := join(scope, m.GetName())
		names[name] = true
		for _, f := range slices.Concat(m.GetField(), m.GetExtension()) {
			names[join(name, f.GetName())] = true
		}
		for _, o := range m.GetOneofDecl() {
			names[join(name, o.GetName())] = true
		}
		for _, e := range m.GetEnumType() {
			enum(name, e)
		}
		for _, n := range m.GetNestedType() {
			message(name, n)
		}
	}
	pkg := protoreflect.FullName(fdp.GetPackage())
	for _, m := range fdp.GetMessageType() {
		message(pkg, m)
	}
	for _, e := range fdp.GetEnumType() {
		enum(pkg, e)
	}
	for _, x := range fdp.GetExtension() {
		names[join(pkg, x.GetName())] = true
	}
	for _, s := range fdp.GetService() {
		name := join(pkg, s.GetName())
		names[name] = true
		for _, m := range s.GetMethod() {
			names[join(name, m.GetName())] = true
		}
	}
	return names
}

// restoreProto3Optional sets again the proto3_optional flag
// @grpc/reflection 1.0.4 drops: in a proto3 file, a field declared
// optional alone in a oneof named "_" + its name, that oneof and every
// later one being such, is what protoc makes of `optional` (a synthetic
// oneof, after the real ones). The field keeps its presence either way;
// the flag tells it from a real oneof, in descriptors and documents. It
// returns the full names of the fields flagged.
func restoreProto3Optional(fdp *descriptorpb.FileDescriptorProto) []string {
	if fdp.GetSyntax() != "proto3" {
		return nil
	}
	var done []string
	var message func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto)
	message = func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto) {
		name := join(scope, m.GetName())
		members := make([][]*descriptorpb.FieldDescriptorProto, len(m.GetOneofDecl()))
		for _, f := range m.GetField() {
			if f.OneofIndex != nil && f.GetOneofIndex() >= 0 && int(f.GetOneofIndex()) < len(members) {
				members[f.GetOneofIndex()] = append(members[f.GetOneofIndex()], f)
			}
		}
		var flagged []string
		for i := len(members) - 1; i >= 0; i-- {
			fields := members[i]
			if len(fields) != 1 {
				break
			}
			f := fields[0]
			if f.GetProto3Optional() {
				continue
			}
			if m.GetOneofDecl()[i].GetName() != "_"+f.GetName() || f.GetLabel() != descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL {
				break
			}
			f.Proto3Optional = proto.Bool(true)
			flagged = append(flagged, string(join(name, f.GetName())))
		}
		slices.Reverse(flagged) // from the last oneof up: in declaration order
		done = append(done, flagged...)
		for _, n := range m.GetNestedType() {
			message(name, n)
		}
	}
	for _, m := range fdp.GetMessageType() {
		message(protoreflect.FullName(fdp.GetPackage()), m)
	}
	return done
}

// oversized says how fdp exceeds the bounds the repair keeps to (a full
// name or a type name over maxNameLength bytes, a scope deeper than
// maxScopeDepth components), or "" when it does not. It walks the file
// once without building any name.
func oversized(fdp *descriptorpb.FileDescriptorProto) string {
	pkg := fdp.GetPackage()
	tooLong := fmt.Sprintf("a name is longer than %d bytes", maxNameLength)
	if len(pkg) > maxNameLength {
		return tooLong
	}
	pkgDepth := 0
	if pkg != "" {
		pkgDepth = strings.Count(pkg, ".") + 1
	}
	if pkgDepth > maxScopeDepth {
		return fmt.Sprintf("a scope is deeper than %d components", maxScopeDepth)
	}
	// name checks a declaration of length n in a scope of length scope.
	name := func(scope, n int) bool { return scope+1+n <= maxNameLength }
	ref := func(s *string) bool { return s == nil || len(*s) <= maxNameLength+1 }
	field := func(scope int, f *descriptorpb.FieldDescriptorProto) bool {
		return name(scope, len(f.GetName())) && ref(f.TypeName) && ref(f.Extendee)
	}
	enum := func(scope int, e *descriptorpb.EnumDescriptorProto) bool {
		if !name(scope, len(e.GetName())) {
			return false
		}
		for _, v := range e.GetValue() {
			if !name(scope, len(v.GetName())) {
				return false
			}
		}
		return true
	}
	var why string
	var message func(scope, depth int, m *descriptorpb.DescriptorProto) bool
	message = func(scope, depth int, m *descriptorpb.DescriptorProto) bool {
		if depth > maxScopeDepth {
			why = fmt.Sprintf("a scope is deeper than %d components", maxScopeDepth)
			return false
		}
		if !name(scope, len(m.GetName())) {
			return false
		}
		full := scope + 1 + len(m.GetName())
		for _, f := range slices.Concat(m.GetField(), m.GetExtension()) {
			if !field(full, f) {
				return false
			}
		}
		for _, o := range m.GetOneofDecl() {
			if !name(full, len(o.GetName())) {
				return false
			}
		}
		for _, e := range m.GetEnumType() {
			if !enum(full, e) {
				return false
			}
		}
		for _, n := range m.GetNestedType() {
			if !message(full, depth+1, n) {
				return false
			}
		}
		return true
	}
	ok := true
	for _, m := range fdp.GetMessageType() {
		ok = ok && message(len(pkg), pkgDepth+1, m)
	}
	for _, e := range fdp.GetEnumType() {
		ok = ok && enum(len(pkg), e)
	}
	for _, x := range fdp.GetExtension() {
		ok = ok && field(len(pkg), x)
	}
	for _, s := range fdp.GetService() {
		ok = ok && name(len(pkg), len(s.GetName()))
		for _, m := range s.GetMethod() {
			ok = ok && name(len(pkg)+1+len(s.GetName()), len(m.GetName())) && ref(m.InputType) && ref(m.OutputType)
		}
	}
	switch {
	case why != "":
		return why
	case !ok:
		return tooLong
	}
	return ""
}
