package reflect

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// TestProtoSource: every kind of definition prints as .proto source
// ending in one newline, with type names in full; the same definition
// from a registry built by discovery (a copy of the generated file)
// prints the same text; generated descriptors carry no comments.
func TestProtoSource(t *testing.T) {
	copied, err := protodesc.NewFile(protodesc.ToFileDescriptorProto(helloworld.File_helloworld_helloworld_proto), nil)
	if err != nil {
		t.Fatal(err)
	}
	greeter := helloworld.File_helloworld_helloworld_proto.Services().ByName("Greeter")
	test := testv1.File_testpb_v1_test_proto
	tests := []struct {
		name string
		d    protoreflect.Descriptor
		want string
	}{
		{name: "service", d: greeter,
			want: "service Greeter {\n  rpc SayHello ( .helloworld.HelloRequest ) returns ( .helloworld.HelloReply );\n}\n"},
		{name: "service of a copy", d: copied.Services().ByName("Greeter"),
			want: "service Greeter {\n  rpc SayHello ( .helloworld.HelloRequest ) returns ( .helloworld.HelloReply );\n}\n"},
		{name: "method", d: greeter.Methods().ByName("SayHello"),
			want: "rpc SayHello ( .helloworld.HelloRequest ) returns ( .helloworld.HelloReply );\n"},
		{name: "bidirectional stream", d: test.Services().ByName("TestService").Methods().ByName("BidiStream"),
			want: "rpc BidiStream ( stream .test.v1.StreamItem ) returns ( stream .test.v1.StreamItem );\n"},
		{name: "message", d: test.Messages().ByName("Inner"),
			want: "message Inner {\n  string name = 1;\n  int64 big = 2;\n}\n"},
		{name: "enum", d: test.Enums().ByName("Color"),
			want: "enum Color {\n  COLOR_UNSPECIFIED = 0;\n  COLOR_RED = 1;\n  COLOR_GREEN = 2;\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ProtoSource(tt.d)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			if strings.Contains(got, "//") {
				t.Errorf("got comments from generated descriptors, which carry none")
			}
		})
	}
}

// FuzzProtoSource: whatever files a backend sends, every service, method,
// message and enum that discovery builds from them prints (describe
// --format proto) without a panic or an error, as one definition of its
// kind and name ending in a newline. The seeds are FuzzDescribe's.
//
//	go test -run '^$' -fuzz FuzzProtoSource -fuzztime 60s -fuzzminimizetime 20x ./reflect/
func FuzzProtoSource(f *testing.F) {
	addDescribeSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		set := new(descriptorpb.FileDescriptorSet)
		if proto.Unmarshal(b, set) != nil || len(set.GetFile()) > 50 {
			return
		}
		for _, fdp := range set.GetFile() {
			if fdp == nil {
				return
			}
		}
		reg, err := describe(t.Context(), newDescriber(newMemSource(set.GetFile()...)), services(set.GetFile()...))
		if err != nil {
			return
		}
		check := func(d protoreflect.Descriptor, keyword string) {
			s, err := ProtoSource(d)
			if err != nil {
				t.Fatalf("%s: %v", d.FullName(), err)
			}
			head := keyword + " " + string(d.Name())
			if !strings.HasSuffix(s, "\n") || strings.HasSuffix(s, "\n\n") || !strings.Contains(s, head) {
				t.Fatalf("%s printed as %q, want a definition starting %q, ending in one newline", d.FullName(), s, head)
			}
		}
		var types func(c typeContainer)
		types = func(c typeContainer) {
			for i := range c.Enums().Len() {
				check(c.Enums().Get(i), "enum")
			}
			for i := range c.Messages().Len() {
				m := c.Messages().Get(i)
				check(m, "message")
				types(m)
			}
		}
		reg.Files().RangeFiles(func(fd protoreflect.FileDescriptor) bool {
			types(fd)
			for i := range fd.Services().Len() {
				sd := fd.Services().Get(i)
				check(sd, "service")
				for j := range sd.Methods().Len() {
					check(sd.Methods().Get(j), "rpc")
				}
			}
			return true
		})
	})
}

// typeContainer is a file or a message.
type typeContainer interface {
	Messages() protoreflect.MessageDescriptors
	Enums() protoreflect.EnumDescriptors
}
