package mapping

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

func pingValue(s string) protoreflect.Value { return protoreflect.ValueOfString(s) }

func TestResolver(t *testing.T) {
	b := loadBackend(t)
	tests := []struct {
		name        string
		backend     *protoregistry.Types
		lookup      protoreflect.FullName
		wantFound   bool
		wantDynamic bool // found in the backend, not the global registry
	}{
		{"backend type", b.types, "rpc.ops.PingRequest", true, true},
		{"backend first for shared names", b.types, "google.protobuf.Duration", true, true},
		{"global fallback", b.types, "google.rpc.BadRequest", true, false},
		{"nil backend", nil, "google.rpc.ErrorInfo", true, false},
		{"nil backend misses backend types", nil, "rpc.ops.PingRequest", false, false},
		{"missing", b.types, "no.such.Message", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := NewResolver(tc.backend)
			for _, find := range []struct {
				how string
				fn  func() (protoreflect.MessageType, error)
			}{
				{"by name", func() (protoreflect.MessageType, error) { return res.FindMessageByName(tc.lookup) }},
				{"by URL", func() (protoreflect.MessageType, error) {
					return res.FindMessageByURL("type.googleapis.com/" + string(tc.lookup))
				}},
			} {
				mt, err := find.fn()
				if !tc.wantFound {
					if !errors.Is(err, protoregistry.NotFound) {
						t.Errorf("%s: got %v, %v, want protoregistry.NotFound", find.how, mt, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: got %v, want a type", find.how, err)
				}
				if got := mt.Descriptor().FullName(); got != tc.lookup {
					t.Errorf("%s: got %s, want %s", find.how, got, tc.lookup)
				}
				_, dynamic := mt.New().Interface().(*dynamicpb.Message)
				if dynamic != tc.wantDynamic {
					t.Errorf("%s: got dynamic %v, want %v", find.how, dynamic, tc.wantDynamic)
				}
			}
		})
	}
}

func TestResolverExtensions(t *testing.T) {
	fdp := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("ext/ext.proto"),
		Package:    proto.String("ext"),
		Dependency: []string{"google/protobuf/descriptor.proto"},
		Extension: []*descriptorpb.FieldDescriptorProto{{
			Name:     proto.String("tag"),
			Number:   proto.Int32(50000),
			Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:     descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
			Extendee: proto.String(".google.protobuf.MessageOptions"),
			JsonName: proto.String("tag"),
		}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	backend := new(protoregistry.Types)
	if err := backend.RegisterExtension(dynamicpb.NewExtensionType(fd.Extensions().Get(0))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		backend   *protoregistry.Types
		wantFound bool
	}{
		{"in backend", backend, true},
		{"nil backend", nil, false},
		{"empty backend", new(protoregistry.Types), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := NewResolver(tc.backend)
			byName, err1 := res.FindExtensionByName("ext.tag")
			byNumber, err2 := res.FindExtensionByNumber("google.protobuf.MessageOptions", 50000)
			if !tc.wantFound {
				if !errors.Is(err1, protoregistry.NotFound) || !errors.Is(err2, protoregistry.NotFound) {
					t.Errorf("got %v, %v, want protoregistry.NotFound twice", err1, err2)
				}
				return
			}
			if err1 != nil || err2 != nil {
				t.Fatalf("got %v, %v, want the extension", err1, err2)
			}
			if byName.TypeDescriptor().FullName() != "ext.tag" || byNumber.TypeDescriptor().FullName() != "ext.tag" {
				t.Errorf("got %s and %s, want ext.tag", byName.TypeDescriptor().FullName(), byNumber.TypeDescriptor().FullName())
			}
		})
	}
}
