package interop_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/nodereflect"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// testNodeQuirks asks the Node server's reflection for the file of
// test.v1.TestService and checks that @grpc/reflection serves it as
// proto/testpb/nodereflect's fake says (nodereflect.Node104), on which the
// reflect package's unit tests rely, and that its google.protobuf file
// still has the google.protobuf.Struct protobuf-go refuses, which the
// bridge replaces by its own (the reflection subtest shows it works).
func testNodeQuirks(t *testing.T, be *backend) {
	conn, err := grpc.NewClient(be.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	req := &reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "test.v1.TestService"},
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	served := make(map[string]*descriptorpb.FileDescriptorProto)
	var order []string
	for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
		fdp := new(descriptorpb.FileDescriptorProto)
		if err := proto.Unmarshal(b, fdp); err != nil {
			t.Fatal(err)
		}
		served[fdp.GetName()] = fdp
		order = append(order, fdp.GetName())
	}
	if len(order) != 2 || order[0] != "test_v1.proto" || order[1] != "google_protobuf.proto" {
		t.Fatalf("the answer holds %q, want test_v1.proto and google_protobuf.proto", order)
	}

	// test_v1.proto is what the fake makes of test.proto, but for an
	// empty FieldOptions protobufjs leaves on opt_int32.
	files := []*descriptorpb.FileDescriptorProto{protodesc.ToFileDescriptorProto(testv1.File_testpb_v1_test_proto)}
	imports := testv1.File_testpb_v1_test_proto.Imports()
	for i := range imports.Len() {
		files = append(files, protodesc.ToFileDescriptorProto(imports.Get(i).FileDescriptor))
	}
	want := nodereflect.Mangle(nodereflect.Node104, files...)[0]
	got := served["test_v1.proto"]
	for _, m := range got.GetMessageType() {
		for _, f := range m.GetField() {
			if f.Options != nil && proto.Size(f.Options) == 0 {
				f.Options = nil
			}
		}
	}
	if !proto.Equal(got, want) {
		t.Errorf("@grpc/reflection serves test_v1.proto otherwise than nodereflect.Mangle says: update the fake\n got: %s\nwant: %s",
			prototext.Format(got), prototext.Format(want))
	}

	// Its google.protobuf.Struct has the map entry Fields.
	var entry *descriptorpb.DescriptorProto
	for _, m := range served["google_protobuf.proto"].GetMessageType() {
		if m.GetName() == "Struct" && len(m.GetNestedType()) == 1 {
			entry = m.GetNestedType()[0]
		}
	}
	if entry.GetName() != "Fields" || !entry.GetOptions().GetMapEntry() {
		t.Errorf("google_protobuf.proto's google.protobuf.Struct has the entry %v, want Fields (grpc-node issue 3034): "+
			"update the reflect package's tests and docs/backends.md", entry)
	}
}
