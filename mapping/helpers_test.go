package mapping

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// backend is what the bridge has of a backend: files from a descriptor set
// in a private registry and dynamicpb types of them, no generated code.
type backend struct {
	files *protoregistry.Files
	types *protoregistry.Types
}

// loadBackend reads proto/testpb/test.protoset the way the bridge would
// after reflection.
func loadBackend(tb testing.TB) backend {
	tb.Helper()
	raw, err := os.ReadFile("../proto/testpb/test.protoset")
	if err != nil {
		tb.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		tb.Fatal(err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		tb.Fatal(err)
	}
	types := new(protoregistry.Types)
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		registerTypes(tb, types, fd.Messages(), fd.Enums(), fd.Extensions())
		return true
	})
	return backend{files: files, types: types}
}

func registerTypes(tb testing.TB, types *protoregistry.Types, msgs protoreflect.MessageDescriptors, enums protoreflect.EnumDescriptors, exts protoreflect.ExtensionDescriptors) {
	for i := range enums.Len() {
		if err := types.RegisterEnum(dynamicpb.NewEnumType(enums.Get(i))); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range exts.Len() {
		if err := types.RegisterExtension(dynamicpb.NewExtensionType(exts.Get(i))); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range msgs.Len() {
		md := msgs.Get(i)
		if md.IsMapEntry() {
			continue
		}
		if err := types.RegisterMessage(dynamicpb.NewMessageType(md)); err != nil {
			tb.Fatal(err)
		}
		registerTypes(tb, types, md.Messages(), md.Enums(), md.Extensions())
	}
}

// method finds a method of the backend's files by full name.
func (b backend) method(tb testing.TB, name protoreflect.FullName) protoreflect.MethodDescriptor {
	tb.Helper()
	d, err := b.files.FindDescriptorByName(name)
	if err != nil {
		tb.Fatal(err)
	}
	return d.(protoreflect.MethodDescriptor)
}

// generatedEcho is test.v1.TestService.Echo from the generated code.
func generatedEcho() protoreflect.MethodDescriptor {
	return testv1.File_testpb_v1_test_proto.Services().ByName("TestService").Methods().ByName("Echo")
}

// codecCase is one way to get the Echo codec: generated or dynamic.
type codecCase struct {
	name  string
	codec func(tb testing.TB, opts Options) *Codec
}

func echoCodecs() []codecCase {
	return []codecCase{
		{"generated", func(tb testing.TB, opts Options) *Codec {
			return NewCodec(generatedEcho(), NewResolver(nil), opts)
		}},
		{"dynamic", func(tb testing.TB, opts Options) *Codec {
			b := loadBackend(tb)
			return NewCodec(b.method(tb, "test.v1.TestService.Echo"), NewResolver(b.types), opts)
		}},
	}
}

// jsonEqual compares two JSON texts as parsed values.
func jsonEqual(tb testing.TB, got, want []byte) bool {
	tb.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		tb.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		tb.Fatalf("want invalid JSON %s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}
