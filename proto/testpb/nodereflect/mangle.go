package nodereflect

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Quirk is one way @grpc/reflection 1.0.4 (with @grpc/proto-loader and
// protobufjs) serves files otherwise than protoc wrote them (grpc-node
// issue 3034). Mangle applies them.
type Quirk uint

const (
	// MergePackages serves one file per package, named after it
	// ("test_v1.proto", "google_protobuf.proto"), declaring everything
	// the package's files declare; no file is served by its own path.
	MergePackages Quirk = 1 << iota
	// RelativeNames writes field types and extendees as the .proto file
	// does, relative to the field's scope ("Inner", "AllTypes.Nested",
	// "google.protobuf.Timestamp"); methods keep full names.
	RelativeNames
	// MapEntryNames names map entry messages after their field with a
	// capital initial ("M_string_int64", "Fields") instead of protobuf's
	// CamelCase(field) + "Entry" ("MStringInt64Entry", "FieldsEntry").
	MapEntryNames
	// DropOptional clears proto3_optional: an optional field becomes
	// the only field of a real oneof named "_" + its name.
	DropOptional
	// DropJSONNames clears json_name.
	DropJSONNames

	// Node104 is every quirk, as 1.0.4 serves files.
	Node104 = MergePackages | RelativeNames | MapEntryNames | DropOptional | DropJSONNames
)

// Mangle returns copies of files as @grpc/reflection 1.0.4 would serve
// them with the quirks q (besides the empty dependency lists New always
// gives). files must be valid and together declare every type they use.
func Mangle(q Quirk, files ...*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
	out := make([]*descriptorpb.FileDescriptorProto, len(files))
	declared := make(map[string]bool)
	for i, f := range files {
		out[i] = proto.CloneOf(f)
		declare(declared, f)
	}
	if q&MapEntryNames != 0 {
		renames := make(map[string]string) // full names with a leading dot
		for _, f := range out {
			for _, m := range f.GetMessageType() {
				renameEntries(renames, "."+join(f.GetPackage(), m.GetName()), m)
			}
		}
		for _, f := range out {
			eachField(f, func(_ string, fd *descriptorpb.FieldDescriptorProto) {
				if to, ok := renames[fd.GetTypeName()]; ok {
					fd.TypeName = proto.String(to)
				}
			})
		}
		declared = make(map[string]bool)
		for _, f := range out {
			declare(declared, f)
		}
	}
	for _, f := range out {
		eachField(f, func(scope string, fd *descriptorpb.FieldDescriptorProto) {
			if q&RelativeNames != 0 {
				if fd.TypeName != nil {
					fd.TypeName = proto.String(relative(declared, scope, fd.GetTypeName()))
				}
				if fd.Extendee != nil {
					fd.Extendee = proto.String(relative(declared, scope, fd.GetExtendee()))
				}
			}
			if q&DropOptional != 0 {
				fd.Proto3Optional = nil
			}
			if q&DropJSONNames != 0 {
				fd.JsonName = nil
			}
		})
	}
	if q&MergePackages != 0 {
		out = merge(out)
	}
	return out
}

// renameEntries renames the map entries nested in m (full name name, with
// a leading dot), and in its nested messages, recording old → new.
func renameEntries(renames map[string]string, name string, m *descriptorpb.DescriptorProto) {
	for _, n := range m.GetNestedType() {
		if !n.GetOptions().GetMapEntry() {
			continue
		}
		for _, f := range m.GetField() {
			if f.GetTypeName() == name+"."+n.GetName() && f.GetName() != "" {
				renamed := strings.ToUpper(f.GetName()[:1]) + f.GetName()[1:]
				renames[name+"."+n.GetName()] = name + "." + renamed
				n.Name = proto.String(renamed)
				break
			}
		}
	}
	for _, n := range m.GetNestedType() {
		renameEntries(renames, name+"."+n.GetName(), n)
	}
}

// relative returns the shortest trailing part of full (with a leading
// dot) that protobuf's scoping resolves to full from scope, as a .proto
// file would write it.
func relative(declared map[string]bool, scope, full string) string {
	target := strings.TrimPrefix(full, ".")
	parts := strings.Split(target, ".")
	for k := 1; k <= len(parts); k++ {
		ref := strings.Join(parts[len(parts)-k:], ".")
		if resolve(declared, scope, ref) == target {
			return ref
		}
	}
	return full
}

// resolve returns what ref means in scope: the first of scope.ref, its
// parent's .ref, ..., ref that is declared; "" when none is.
func resolve(declared map[string]bool, scope, ref string) string {
	for {
		if name := join(scope, ref); declared[name] {
			return name
		}
		if scope == "" {
			return ""
		}
		if i := strings.LastIndexByte(scope, '.'); i >= 0 {
			scope = scope[:i]
		} else {
			scope = ""
		}
	}
}

// declare adds the full names of the messages and enums of f, nested
// ones included, to declared.
func declare(declared map[string]bool, f *descriptorpb.FileDescriptorProto) {
	var message func(scope string, m *descriptorpb.DescriptorProto)
	message = func(scope string, m *descriptorpb.DescriptorProto) {
		name := join(scope, m.GetName())
		declared[name] = true
		for _, e := range m.GetEnumType() {
			declared[join(name, e.GetName())] = true
		}
		for _, n := range m.GetNestedType() {
			message(name, n)
		}
	}
	for _, m := range f.GetMessageType() {
		message(f.GetPackage(), m)
	}
	for _, e := range f.GetEnumType() {
		declared[join(f.GetPackage(), e.GetName())] = true
	}
}

// eachField calls fn with every field and extension of f and the scope
// its type names are resolved in.
func eachField(f *descriptorpb.FileDescriptorProto, fn func(scope string, fd *descriptorpb.FieldDescriptorProto)) {
	var message func(scope string, m *descriptorpb.DescriptorProto)
	message = func(scope string, m *descriptorpb.DescriptorProto) {
		name := join(scope, m.GetName())
		for _, fd := range slices.Concat(m.GetField(), m.GetExtension()) {
			fn(name, fd)
		}
		for _, n := range m.GetNestedType() {
			message(name, n)
		}
	}
	for _, m := range f.GetMessageType() {
		message(f.GetPackage(), m)
	}
	for _, x := range f.GetExtension() {
		fn(f.GetPackage(), x)
	}
}

// packagePath is the path MergePackages serves a package's file at.
func packagePath(pkg string) string {
	return strings.ReplaceAll(pkg, ".", "_") + ".proto"
}

// merge makes one file of the files of each package, in the order the
// packages first appear, keeping the first file's syntax and options.
func merge(files []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
	var out []*descriptorpb.FileDescriptorProto
	byPkg := make(map[string]*descriptorpb.FileDescriptorProto)
	for _, f := range files {
		m := byPkg[f.GetPackage()]
		if m == nil {
			m = &descriptorpb.FileDescriptorProto{
				Name: proto.String(packagePath(f.GetPackage())), Package: f.Package,
				Options: f.Options, Syntax: f.Syntax, Edition: f.Edition,
			}
			byPkg[f.GetPackage()] = m
			out = append(out, m)
		}
		m.MessageType = append(m.MessageType, f.MessageType...)
		m.EnumType = append(m.EnumType, f.EnumType...)
		m.Service = append(m.Service, f.Service...)
		m.Extension = append(m.Extension, f.Extension...)
	}
	return out
}
