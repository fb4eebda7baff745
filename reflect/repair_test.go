package reflect

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/nodereflect"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// ghostFiles are hand-made files of a Node backend: ghost.v1.Haunted
// takes ghost.v1.Missing, which no file declares; ghost.v1.Uses takes
// ghost.v1.Shared of another file, which no answer carries until the
// bridge asks for that symbol.
func ghostFiles() []*descriptorpb.FileDescriptorProto {
	method := func(name, in, out string) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{Name: proto.String(name), InputType: proto.String(in), OutputType: proto.String(out)}
	}
	return []*descriptorpb.FileDescriptorProto{{
		Name: proto.String("ghost/v1/haunted.proto"), Package: proto.String("ghost.v1"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/empty.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Haunted"), Method: []*descriptorpb.MethodDescriptorProto{method("Boo", ".ghost.v1.Missing", ".google.protobuf.Empty")},
		}},
	}, {
		Name: proto.String("ghost/v1/shared.proto"), Package: proto.String("ghost.v1"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Shared"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name: proto.String("at"), JsonName: proto.String("at"), Number: proto.Int32(1),
				Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
				Type:     descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(),
				TypeName: proto.String(".google.protobuf.Timestamp"),
			}},
		}},
	}, {
		Name: proto.String("ghost/v1/uses.proto"), Package: proto.String("ghost.v1"), Syntax: proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Uses"), Method: []*descriptorpb.MethodDescriptorProto{method("Get", "Shared", ".ghost.v1.Shared")},
		}},
	}}
}

// nodeBackend serves helloworld.Greeter (a file needing no other),
// demo.v1.Notes (google.protobuf.Timestamp), test.v1.TestService (seven
// well-known types) and the ghost services on loopback, with a reflection
// service answering as @grpc/reflection 1.0.4 does (no dependency lists),
// offering the reflection services named. With wellKnown it also serves
// the google/protobuf files; without, it knows nothing of them.
func nodeBackend(t *testing.T, wellKnown bool, reflection ...string) (*grpc.ClientConn, *nodereflect.Server) {
	t.Helper()
	files := slices.Concat(nodereflect.Protos(helloworld.File_helloworld_helloworld_proto,
		demov1.File_demo_v1_notes_proto, testv1.File_testpb_v1_test_proto), ghostFiles())
	if wellKnown {
		protoregistry.GlobalFiles.RangeFilesByPackage("google.protobuf", func(fd protoreflect.FileDescriptor) bool {
			files = append(files, protodesc.ToFileDescriptorProto(fd))
			return true
		})
	}
	refl := nodereflect.New(files...)
	conn := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Reflection: testserver.ReflectionNone,
		Services: []testserver.Service{testserver.Greeter, testserver.Notes, testserver.Test(testv1.NewServer()),
			func(s *grpc.Server) { refl.Register(s, reflection...) }}}).Conn()
	return conn, refl
}

// invoke calls method of reg on conn with the request in JSON and returns
// the response in JSON.
func invoke(t *testing.T, reg *Registry, conn *grpc.ClientConn, method, request string) string {
	t.Helper()
	md, ok := reg.Method(method)
	if !ok {
		t.Fatalf("%s is not discovered; methods %q", method, methodNames(reg))
	}
	in := dynamicpb.NewMessage(md.Input())
	if err := (protojson.UnmarshalOptions{Resolver: reg.Types()}).Unmarshal([]byte(request), in); err != nil {
		t.Fatalf("%s request: %v", method, err)
	}
	out := dynamicpb.NewMessage(md.Output())
	full := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	if err := conn.Invoke(t.Context(), full, in, out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	b, err := protojson.MarshalOptions{Resolver: reg.Types()}.Marshal(out)
	if err != nil {
		t.Fatalf("%s response: %v", method, err)
	}
	return string(b)
}

// TestDiscoverRepairsNodeDescriptors: a backend whose reflection omits
// every dependency list (Node's @grpc/reflection 1.0.4) still has its
// describable services discovered and callable, over v1 and v1alpha
// alike, whether or not it serves the well-known types' files; the
// service needing a type nobody declares is left out with a reason.
func TestDiscoverRepairsNodeDescriptors(t *testing.T) {
	for _, tt := range []struct {
		name       string
		reflection string
		wellKnown  bool
	}{
		{"v1 without well-known files", nodereflect.V1, false},
		{"v1alpha without well-known files", nodereflect.V1Alpha, false},
		{"v1 with well-known files", nodereflect.V1, true},
		{"v1alpha with well-known files", nodereflect.V1Alpha, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, refl := nodeBackend(t, tt.wellKnown, tt.reflection)
			reg, err := Discover(t.Context(), conn)
			if err != nil {
				t.Fatalf("Discover: %v, want the describable services", err)
			}
			want := []string{"demo.v1.Notes", "ghost.v1.Uses", "helloworld.Greeter", "test.v1.TestService"}
			if got := serviceNames(reg); !slices.Equal(got, want) {
				t.Errorf("services %q, want %q", got, want)
			}
			wantStream := "/" + tt.reflection + "/ServerReflectionInfo"
			if got := refl.Streams(); len(got) == 0 || slices.ContainsFunc(got, func(m string) bool { return m != wantStream }) {
				t.Errorf("reflection streams %q, want only %s", got, wantStream)
			}
			skipped := reg.Skipped()
			if len(skipped) != 1 || skipped[0].Name != "ghost.v1.Haunted" || !strings.Contains(skipped[0].Reason, "ghost.v1.Missing") || skipped[0].Err == nil {
				t.Fatalf("skipped %+v, want ghost.v1.Haunted with a reason naming ghost.v1.Missing", skipped)
			}
			t.Logf("reason: %s; error: %v", skipped[0].Reason, skipped[0].Err)
			// Filter keeps the skipped services it selects.
			if f, err := reg.Filter(nil, []string{"ghost.*"}); err != nil || len(f.Skipped()) != 0 {
				t.Errorf("Filter excluding ghost.*: skipped %+v (%v), want none", f.Skipped(), err)
			}
			if f, err := reg.Filter([]string{"ghost.*"}, nil); err != nil || len(f.Skipped()) != 1 {
				t.Errorf("Filter including ghost.*: skipped %+v (%v), want ghost.v1.Haunted", f.Skipped(), err)
			}

			if got := invoke(t, reg, conn, "helloworld.Greeter.SayHello", `{"name":"Ada"}`); !strings.Contains(got, "Hello, Ada!") {
				t.Errorf("SayHello: %s", got)
			}
			got := invoke(t, reg, conn, "demo.v1.Notes.CreateNote", `{"note":{"title":"t"}}`)
			if !strings.Contains(got, `"createdAt":"`) {
				t.Errorf("CreateNote: %s, want a createdAt timestamp", got)
			}
			echo := `{"wktTimestamp":"2024-01-02T03:04:05Z","wktDuration":"1.500s","wktStruct":{"k":[1,"x"]},` +
				`"wktAny":{"@type":"type.googleapis.com/google.protobuf.Duration","value":"2s"},"wktInt64":"7"}`
			if got := invoke(t, reg, conn, "test.v1.TestService.Echo", echo); !strings.Contains(got, `"wktTimestamp":"2024-01-02T03:04:05Z"`) ||
				!strings.Contains(got, `"value":"2s"`) {
				t.Errorf("Echo: %s", got)
			}
			// The repaired files declare what they use.
			fd, err := reg.Files().FindFileByPath("demo/v1/notes.proto")
			if err != nil || fd.Imports().Len() != 1 || fd.Imports().Get(0).Path() != "google/protobuf/timestamp.proto" {
				t.Errorf("notes.proto imports %v (%v), want google/protobuf/timestamp.proto", fd, err)
			}
			md, _ := reg.Method("ghost.v1.Uses.Get")
			if md == nil || md.Input().ParentFile().Path() != "ghost/v1/shared.proto" {
				t.Errorf("ghost.v1.Uses.Get input from %v, want ghost/v1/shared.proto", md)
			}
		})
	}
}
