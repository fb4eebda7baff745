package reflect

import (
	"slices"
	"testing"

	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// extFile is a proto2 file with nested types, extensions and two services:
//
//	package ext.v1;
//	enum Top { TOP_ZERO = 0; }
//	message Outer {
//	  message Nested { enum Kind { KIND_ZERO = 0; } }
//	  extend Outer { optional int32 inner_ext = 101; }
//	  extensions 100 to 200;
//	}
//	extend Outer { optional string top_ext = 100; }
//	service Zed { rpc B(Outer) returns (Outer); rpc A(Outer) returns (Outer); }
//	service Alpha { rpc C(Outer) returns (Outer); }
func extFile() *descriptorpb.FileDescriptorProto {
	outer := ".ext.v1.Outer"
	method := func(name string) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{Name: proto.String(name), InputType: &outer, OutputType: &outer}
	}
	ext := func(name string, number int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{
			Name:     proto.String(name),
			Number:   proto.Int32(number),
			Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:     typ.Enum(),
			Extendee: &outer,
		}
	}
	zero := func(name string) []*descriptorpb.EnumValueDescriptorProto {
		return []*descriptorpb.EnumValueDescriptorProto{{Name: proto.String(name), Number: proto.Int32(0)}}
	}
	return &descriptorpb.FileDescriptorProto{
		Name:     proto.String("ext/v1/ext.proto"),
		Package:  proto.String("ext.v1"),
		Syntax:   proto.String("proto2"),
		EnumType: []*descriptorpb.EnumDescriptorProto{{Name: proto.String("Top"), Value: zero("TOP_ZERO")}},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Outer"),
			NestedType: []*descriptorpb.DescriptorProto{{
				Name:     proto.String("Nested"),
				EnumType: []*descriptorpb.EnumDescriptorProto{{Name: proto.String("Kind"), Value: zero("KIND_ZERO")}},
			}},
			Extension:      []*descriptorpb.FieldDescriptorProto{ext("inner_ext", 101, descriptorpb.FieldDescriptorProto_TYPE_INT32)},
			ExtensionRange: []*descriptorpb.DescriptorProto_ExtensionRange{{Start: proto.Int32(100), End: proto.Int32(201)}},
		}},
		Extension: []*descriptorpb.FieldDescriptorProto{ext("top_ext", 100, descriptorpb.FieldDescriptorProto_TYPE_STRING)},
		Service: []*descriptorpb.ServiceDescriptorProto{
			{Name: proto.String("Zed"), Method: []*descriptorpb.MethodDescriptorProto{method("B"), method("A")}},
			{Name: proto.String("Alpha"), Method: []*descriptorpb.MethodDescriptorProto{method("C")}},
		},
	}
}

// newExtFiles returns private files holding extFile and the reflection v1 file.
func newExtFiles(t *testing.T) *protoregistry.Files {
	t.Helper()
	files := new(protoregistry.Files)
	fd, err := protodesc.NewFile(extFile(), files)
	if err != nil {
		t.Fatalf("NewFile: %v", err)
	}
	for _, f := range []protoreflect.FileDescriptor{fd, reflectionv1.File_grpc_reflection_v1_reflection_proto} {
		if err := files.RegisterFile(f); err != nil {
			t.Fatalf("RegisterFile(%s): %v", f.Path(), err)
		}
	}
	return files
}

func TestNewRegistry(t *testing.T) {
	files := newExtFiles(t)
	reg, err := NewRegistry(files)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	if reg.Files() != files {
		t.Errorf("Files() is not the files given")
	}
	wantMethods := []string{"ext.v1.Alpha.C", "ext.v1.Zed.A", "ext.v1.Zed.B"}
	if got := methodNames(reg); !slices.Equal(got, wantMethods) {
		t.Errorf("Methods() = %q, want %q", got, wantMethods)
	}
	if got, want := serviceNames(reg), []string{"ext.v1.Alpha", "ext.v1.Zed"}; !slices.Equal(got, want) {
		t.Errorf("Services() = %q, want %q", got, want)
	}

	methodTests := []struct {
		name   string
		wantOK bool
	}{
		{name: "ext.v1.Zed.A", wantOK: true},
		{name: "ext.v1.Alpha.C", wantOK: true},
		{name: "ext.v1.Zed", wantOK: false},
		{name: "ext.v1.Zed/A", wantOK: false},
		{name: "grpc.reflection.v1.ServerReflection.ServerReflectionInfo", wantOK: false},
		{name: "", wantOK: false},
	}
	for _, tt := range methodTests {
		t.Run("Method "+tt.name, func(t *testing.T) {
			md, ok := reg.Method(tt.name)
			if ok != tt.wantOK {
				t.Fatalf("Method(%q) ok = %t, want %t", tt.name, ok, tt.wantOK)
			}
			if ok && string(md.FullName()) != tt.name {
				t.Errorf("Method(%q) = %s", tt.name, md.FullName())
			}
		})
	}
}

func TestNewRegistryTypes(t *testing.T) {
	reg, err := NewRegistry(newExtFiles(t))
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	types := reg.Types()
	for _, name := range []protoreflect.FullName{
		"ext.v1.Outer",
		"ext.v1.Outer.Nested",
		// The reflection file's messages are types too; only its service is skipped.
		"grpc.reflection.v1.ServerReflectionRequest",
	} {
		mt, err := types.FindMessageByName(name)
		if err != nil {
			t.Errorf("FindMessageByName(%s): %v", name, err)
			continue
		}
		if m := mt.New().Interface(); !isDynamic(m) {
			t.Errorf("%s is %T, want *dynamicpb.Message", name, m)
		}
	}
	for _, name := range []protoreflect.FullName{"ext.v1.Top", "ext.v1.Outer.Nested.Kind"} {
		if _, err := types.FindEnumByName(name); err != nil {
			t.Errorf("FindEnumByName(%s): %v", name, err)
		}
	}
	extTests := []struct {
		name   protoreflect.FullName
		number protoreflect.FieldNumber
	}{
		{name: "ext.v1.top_ext", number: 100},
		{name: "ext.v1.Outer.inner_ext", number: 101},
	}
	for _, tt := range extTests {
		xt, err := types.FindExtensionByName(tt.name)
		if err != nil {
			t.Errorf("FindExtensionByName(%s): %v", tt.name, err)
			continue
		}
		byNumber, err := types.FindExtensionByNumber("ext.v1.Outer", tt.number)
		if err != nil || byNumber != xt {
			t.Errorf("FindExtensionByNumber(%d) = %v, %v, want %s", tt.number, byNumber, err, tt.name)
		}
	}
	if got := types.NumExtensionsByMessage("ext.v1.Outer"); got != 2 {
		t.Errorf("extensions of Outer = %d, want 2", got)
	}
	if types == protoregistry.GlobalTypes {
		t.Errorf("Types() is the global registry")
	}
}

func TestNewRegistryEmpty(t *testing.T) {
	reg, err := NewRegistry(new(protoregistry.Files))
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	if len(reg.Methods()) != 0 || len(reg.Services()) != 0 {
		t.Errorf("got %d methods, %d services, want none", len(reg.Methods()), len(reg.Services()))
	}
	if _, ok := reg.Method("a.B.C"); ok {
		t.Errorf("Method found in empty registry")
	}
}

func TestNewRegistryNil(t *testing.T) {
	if reg, err := NewRegistry(nil); err == nil {
		t.Errorf("NewRegistry(nil) = %v, nil, want an error", reg)
	}
}

func isDynamic(m proto.Message) bool {
	_, ok := m.(*dynamicpb.Message)
	return ok
}
