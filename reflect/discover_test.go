package reflect

import (
	"context"
	"errors"
	"net"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

var wantMethods = []string{
	"demo.v1.Notes.CreateNote",
	"demo.v1.Notes.GetCounter",
	"demo.v1.Notes.GetNote",
	"demo.v1.Notes.ImportNotes",
	"demo.v1.Notes.Increment",
	"demo.v1.Notes.ListNotes",
	"demo.v1.Notes.TagNotes",
	"demo.v1.Notes.WatchNotes",
	"helloworld.Greeter.SayHello",
	"rpc.ops.Ops.Ping",
	"test.v1.TestService.BidiStream",
	"test.v1.TestService.ClientStream",
	"test.v1.TestService.Count",
	"test.v1.TestService.Echo",
	"test.v1.TestService.Fail",
	"test.v1.TestService.Old",
	"test.v1.TestService.Peek",
	"test.v1.TestService.ServerStream",
	"test.v1.TestService.Sleep",
}

const (
	reflectionV1Method      = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	reflectionV1AlphaMethod = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
)

var wantServices = []string{
	"demo.v1.Notes",
	"helloworld.Greeter",
	"rpc.ops.Ops",
	"test.v1.TestService",
}

func methodNames(reg *Registry) []string {
	var names []string
	for _, md := range reg.Methods() {
		names = append(names, string(md.FullName()))
	}
	return names
}

func serviceNames(reg *Registry) []string {
	var names []string
	for _, sd := range reg.Services() {
		names = append(names, string(sd.FullName()))
	}
	return names
}

func TestDiscover(t *testing.T) {
	tests := []struct {
		name       string
		mode       reflectionMode
		wantStream string
	}{
		{name: "v1 and v1alpha", mode: reflectionBoth, wantStream: reflectionV1Method},
		{name: "v1 only", mode: reflectionV1, wantStream: reflectionV1Method},
		{name: "v1alpha only", mode: reflectionV1Alpha, wantStream: reflectionV1AlphaMethod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec streamRecorder
			reg, err := Discover(t.Context(), dialBufconn(t, tt.mode, rec.option()))
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if got := rec.called(); len(got) == 0 || slices.ContainsFunc(got, func(m string) bool { return m != tt.wantStream }) {
				t.Errorf("reflection streams served = %q, want only %s", got, tt.wantStream)
			}
			if got := methodNames(reg); !slices.Equal(got, wantMethods) {
				t.Errorf("Methods() = %q, want %q", got, wantMethods)
			}
			if got := serviceNames(reg); !slices.Equal(got, wantServices) {
				t.Errorf("Services() = %q, want %q", got, wantServices)
			}
			if got := reg.Repairs(); len(got) != 0 {
				t.Errorf("Repairs() = %q for grpc-go's reflection, want none", got)
			}
			for _, name := range wantMethods {
				md, ok := reg.Method(name)
				if !ok || string(md.FullName()) != name {
					t.Errorf("Method(%q) = %v, %t, want the method", name, md, ok)
				}
			}
			if md, ok := reg.Method("grpc.reflection.v1.ServerReflection.ServerReflectionInfo"); ok {
				t.Errorf("Method(reflection) = %v, want none", md.FullName())
			}
			reg.Files().RangeFiles(func(fd protoreflect.FileDescriptor) bool {
				if strings.HasPrefix(string(fd.Package()), "grpc.reflection") {
					t.Errorf("Files() has %s, want no reflection files", fd.Path())
				}
				return true
			})
			md, _ := reg.Method("test.v1.TestService.Echo")
			if got := md.Input().FullName(); got != "test.v1.AllTypes" {
				t.Errorf("Echo input = %s, want test.v1.AllTypes", got)
			}
		})
	}
}

func TestDiscoverWithoutReflection(t *testing.T) {
	_, err := Discover(t.Context(), dialBufconn(t, reflectionNone))
	if !errors.Is(err, ErrReflectionUnsupported) {
		t.Fatalf("Discover error = %v, want ErrReflectionUnsupported", err)
	}
	if got := status.Code(err); got != codes.Unimplemented {
		t.Errorf("status.Code = %v, want Unimplemented", got)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return addr
}

func dialTCP(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestDiscoverUnreachable(t *testing.T) {
	_, err := Discover(t.Context(), dialTCP(t, closedAddr(t)))
	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("status.Code(%v) = %v, want Unavailable", err, got)
	}
	if errors.Is(err, ErrReflectionUnsupported) {
		t.Errorf("error %v is ErrReflectionUnsupported, want not", err)
	}
}

func TestDiscoverCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Discover(ctx, dialBufconn(t, reflectionBoth))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Discover error = %v, want context.Canceled", err)
	}
	if got := status.Code(err); got != codes.Canceled {
		t.Errorf("status.Code = %v, want Canceled", got)
	}
}

func TestDiscoverTCP(t *testing.T) {
	conn := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Services: fourServices}).Conn()
	reg, err := Discover(t.Context(), conn)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if got := methodNames(reg); !slices.Equal(got, wantMethods) {
		t.Errorf("Methods() = %q, want %q", got, wantMethods)
	}
}

func TestDiscoveredTypes(t *testing.T) {
	reg, err := Discover(t.Context(), dialBufconn(t, reflectionBoth))
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	types := reg.Types()
	for _, name := range []protoreflect.FullName{
		"test.v1.CustomDetail",
		"test.v1.AllTypes",
		"test.v1.Inner",
		"google.protobuf.Timestamp",
		"google.protobuf.Any",
		"demo.v1.Note",
	} {
		mt, err := types.FindMessageByName(name)
		if err != nil {
			t.Errorf("FindMessageByName(%s): %v", name, err)
			continue
		}
		if _, ok := mt.New().Interface().(*dynamicpb.Message); !ok {
			t.Errorf("%s is %T, want *dynamicpb.Message", name, mt.New().Interface())
		}
		fd, err := reg.Files().FindDescriptorByName(name)
		if err != nil || fd != mt.Descriptor() {
			t.Errorf("%s type descriptor is not the one in Files()", name)
		}
	}
	for _, name := range []protoreflect.FullName{"test.v1.Color", "demo.v1.Priority", "google.protobuf.NullValue"} {
		if _, err := types.FindEnumByName(name); err != nil {
			t.Errorf("FindEnumByName(%s): %v", name, err)
		}
	}
	// A map entry is a nested message.
	if _, err := types.FindMessageByName("test.v1.AllTypes.MStringInt64Entry"); err != nil {
		t.Errorf("nested map entry: %v", err)
	}

	tests := []struct {
		name    string
		message protoreflect.FullName
		json    string
	}{
		{
			name:    "all types",
			message: "test.v1.AllTypes",
			json: `{"fInt64":"-9","fString":"héllo","fEnum":"COLOR_GREEN","fMessage":{"name":"n","big":"12"},
				"mStringInt64":{"a":"1"},"oMessage":{"name":"o"},"tree":{"value":"r","children":[{"value":"c"}]},
				"wktTimestamp":"2024-01-02T03:04:05.000000006Z","wktDuration":"1.500s","wktStruct":{"k":[1,"x",null]},
				"wktInt64":"7","wktFieldMask":"fInt64,wktAny",
				"wktAny":{"@type":"type.googleapis.com/test.v1.CustomDetail","reason":"busy","retryAfterMs":"250"}}`,
		},
		{
			name:    "custom detail",
			message: "test.v1.CustomDetail",
			json:    `{"reason":"busy","retryAfterMs":"250"}`,
		},
		{
			name:    "timestamp",
			message: "google.protobuf.Timestamp",
			json:    `"2024-01-02T03:04:05Z"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt, err := types.FindMessageByName(tt.message)
			if err != nil {
				t.Fatalf("FindMessageByName: %v", err)
			}
			m := mt.New().Interface()
			if err := (protojson.UnmarshalOptions{Resolver: types}).Unmarshal([]byte(tt.json), m); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			out, err := protojson.MarshalOptions{Resolver: types}.Marshal(m)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			back := mt.New().Interface()
			if err := (protojson.UnmarshalOptions{Resolver: types}).Unmarshal(out, back); err != nil {
				t.Fatalf("Unmarshal of %s: %v", out, err)
			}
			if !proto.Equal(m, back) {
				t.Errorf("round trip of %s gave %v, want %v", out, back, m)
			}
		})
	}
}

func TestDiscoverLeavesGlobalRegistry(t *testing.T) {
	files, msgs := protoregistry.GlobalFiles.NumFiles(), protoregistry.GlobalTypes.NumMessages()
	enums, exts := protoregistry.GlobalTypes.NumEnums(), protoregistry.GlobalTypes.NumExtensions()
	reg, err := Discover(t.Context(), dialBufconn(t, reflectionBoth))
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if got := protoregistry.GlobalFiles.NumFiles(); got != files {
		t.Errorf("global files = %d, want %d", got, files)
	}
	if got := protoregistry.GlobalTypes.NumMessages(); got != msgs {
		t.Errorf("global messages = %d, want %d", got, msgs)
	}
	if got := protoregistry.GlobalTypes.NumEnums(); got != enums {
		t.Errorf("global enums = %d, want %d", got, enums)
	}
	if got := protoregistry.GlobalTypes.NumExtensions(); got != exts {
		t.Errorf("global extensions = %d, want %d", got, exts)
	}
	// The backend's copies are separate descriptors, well-known types included.
	for _, path := range []string{"testpb/v1/test.proto", "google/protobuf/timestamp.proto", "demo/v1/notes.proto"} {
		local, err := reg.Files().FindFileByPath(path)
		if err != nil {
			t.Errorf("Files().FindFileByPath(%s): %v", path, err)
			continue
		}
		global, err := protoregistry.GlobalFiles.FindFileByPath(path)
		if err != nil {
			t.Fatalf("GlobalFiles.FindFileByPath(%s): %v", path, err)
		}
		if local == global {
			t.Errorf("%s is the global descriptor, want the backend's", path)
		}
	}
	// Shared imports are registered once: timestamp.proto by both demo and test files.
	var wkt []string
	reg.Files().RangeFilesByPackage("google.protobuf", func(fd protoreflect.FileDescriptor) bool {
		wkt = append(wkt, fd.Path())
		return true
	})
	slices.Sort(wkt)
	want := []string{
		"google/protobuf/any.proto", "google/protobuf/duration.proto", "google/protobuf/empty.proto",
		"google/protobuf/field_mask.proto", "google/protobuf/struct.proto", "google/protobuf/timestamp.proto",
		"google/protobuf/wrappers.proto",
	}
	if !slices.Equal(wkt, want) {
		t.Errorf("google.protobuf files = %q, want %q", wkt, want)
	}
}

func TestDiscoverReleasesStream(t *testing.T) {
	conn := dialBufconn(t, reflectionBoth)
	// The first discovery also connects; its transport goroutines stay.
	if _, err := Discover(t.Context(), conn); err != nil {
		t.Fatalf("Discover: %v", err)
	}
	// The reflection client closes a forgotten stream when it is garbage
	// collected; with the collector off only Discover's own release counts.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	before := goleak.IgnoreCurrent()
	if _, err := Discover(t.Context(), conn); err != nil {
		t.Fatalf("Discover: %v", err)
	}
	// The client and server goroutines of the reflection stream have ended
	// while the backend and the connection are still up.
	goleak.VerifyNone(t, before)
}
