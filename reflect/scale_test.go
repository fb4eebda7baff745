package reflect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// The large backend of goal 5 of the performance issue: 200 services of 10
// unary methods each, 2,000 methods in all, over a handful of message types
// (some nested, a map, an enum, two well-known types).
const (
	scaleServices          = 200
	scaleMethodsPerService = 10
	scaleCommonFile        = "scale/common/v1/common.proto"
	scaleCommonPackage     = "scale.common.v1"
)

// scaleMethods are the methods of every synthetic service: name, input and
// output type. Names starting with "." are fully qualified; the others are
// the service file's own messages.
var scaleMethods = [scaleMethodsPerService][3]string{
	{"GetThing", ".scale.common.v1.GetRequest", "Thing"},
	{"ListThings", ".scale.common.v1.ListRequest", ".scale.common.v1.ListResponse"},
	{"CreateThing", "Thing", "Thing"},
	{"UpdateThing", "UpdateThingRequest", "Thing"},
	{"DeleteThing", ".scale.common.v1.GetRequest", ".google.protobuf.Empty"},
	{"BatchGetThings", "BatchGetRequest", ".scale.common.v1.ListResponse"},
	{"SearchThings", ".scale.common.v1.ListRequest", ".scale.common.v1.ListResponse"},
	{"CountThings", ".scale.common.v1.ListRequest", "CountResponse"},
	{"TouchThing", ".scale.common.v1.GetRequest", ".google.protobuf.Timestamp"},
	{"Ping", ".google.protobuf.Empty", ".google.protobuf.Empty"},
}

func scaleField(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, typeName string, repeated bool) *descriptorpb.FieldDescriptorProto {
	label := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	if repeated {
		label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	}
	f := &descriptorpb.FieldDescriptorProto{
		Name:     proto.String(name),
		Number:   proto.Int32(num),
		Label:    label.Enum(),
		Type:     typ.Enum(),
		JsonName: proto.String(jsonName(name)),
	}
	if typeName != "" {
		f.TypeName = proto.String(typeName)
	}
	return f
}

func jsonName(s string) string {
	var b strings.Builder
	up := false
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = []rune(strings.ToUpper(string(r)))[0]
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

const (
	tString  = descriptorpb.FieldDescriptorProto_TYPE_STRING
	tInt32   = descriptorpb.FieldDescriptorProto_TYPE_INT32
	tInt64   = descriptorpb.FieldDescriptorProto_TYPE_INT64
	tBool    = descriptorpb.FieldDescriptorProto_TYPE_BOOL
	tDouble  = descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
	tEnum    = descriptorpb.FieldDescriptorProto_TYPE_ENUM
	tMessage = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
)

func scaleMessage(name string, fields []*descriptorpb.FieldDescriptorProto, nested ...*descriptorpb.DescriptorProto) *descriptorpb.DescriptorProto {
	return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields, NestedType: nested}
}

// scaleCommon is the file every service imports: an enum, a message with
// a nested message and a map, paging requests and responses.
func scaleCommon() *descriptorpb.FileDescriptorProto {
	const p = "." + scaleCommonPackage
	labels := scaleMessage("LabelsEntry", []*descriptorpb.FieldDescriptorProto{
		scaleField("key", 1, tString, "", false),
		scaleField("value", 2, tString, "", false),
	})
	labels.Options = &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)}
	return &descriptorpb.FileDescriptorProto{
		Name:       proto.String(scaleCommonFile),
		Package:    proto.String(scaleCommonPackage),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/protobuf/timestamp.proto"},
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: proto.String("Level"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: proto.String("LEVEL_UNSPECIFIED"), Number: proto.Int32(0)},
				{Name: proto.String("LEVEL_LOW"), Number: proto.Int32(1)},
				{Name: proto.String("LEVEL_HIGH"), Number: proto.Int32(2)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{
			scaleMessage("Page", []*descriptorpb.FieldDescriptorProto{
				scaleField("size", 1, tInt32, "", false),
				scaleField("token", 2, tString, "", false),
			}),
			scaleMessage("Item", []*descriptorpb.FieldDescriptorProto{
				scaleField("id", 1, tString, "", false),
				scaleField("name", 2, tString, "", false),
				scaleField("tags", 3, tString, "", true),
				scaleField("level", 4, tEnum, p+".Level", false),
				scaleField("attrs", 5, tMessage, p+".Item.Attr", true),
				scaleField("labels", 6, tMessage, p+".Item.LabelsEntry", true),
				scaleField("created", 7, tMessage, ".google.protobuf.Timestamp", false),
				scaleField("score", 8, tDouble, "", false),
			},
				scaleMessage("Attr", []*descriptorpb.FieldDescriptorProto{
					scaleField("key", 1, tString, "", false),
					scaleField("value", 2, tString, "", false),
					scaleField("secret", 3, tBool, "", false),
				}),
				labels),
			scaleMessage("GetRequest", []*descriptorpb.FieldDescriptorProto{
				scaleField("id", 1, tString, "", false),
			}),
			scaleMessage("ListRequest", []*descriptorpb.FieldDescriptorProto{
				scaleField("page", 1, tMessage, p+".Page", false),
				scaleField("filter", 2, tString, "", false),
				scaleField("min_level", 3, tEnum, p+".Level", false),
			}),
			scaleMessage("ListResponse", []*descriptorpb.FieldDescriptorProto{
				scaleField("items", 1, tMessage, p+".Item", true),
				scaleField("next_page", 2, tMessage, p+".Page", false),
				scaleField("total", 3, tInt64, "", false),
			}),
		},
	}
}

// scaleServiceName is the full name of the i-th service.
func scaleServiceName(i int) (pkg, svc string) {
	return fmt.Sprintf("scale.svc%03d.v1", i), fmt.Sprintf("Service%03d", i)
}

// scaleServiceFile is the i-th service's own file: four messages of its own
// (one with a nested message) and the service.
func scaleServiceFile(i int) *descriptorpb.FileDescriptorProto {
	pkg, svc := scaleServiceName(i)
	p := "." + pkg
	c := "." + scaleCommonPackage
	qualify := func(n string) string {
		if strings.HasPrefix(n, ".") {
			return n
		}
		return p + "." + n
	}
	sd := &descriptorpb.ServiceDescriptorProto{Name: proto.String(svc)}
	for _, m := range scaleMethods {
		sd.Method = append(sd.Method, &descriptorpb.MethodDescriptorProto{
			Name:       proto.String(m[0]),
			InputType:  proto.String(qualify(m[1])),
			OutputType: proto.String(qualify(m[2])),
		})
	}
	return &descriptorpb.FileDescriptorProto{
		Name:       proto.String(fmt.Sprintf("scale/svc%03d/v1/service.proto", i)),
		Package:    proto.String(pkg),
		Syntax:     proto.String("proto3"),
		Dependency: []string{scaleCommonFile, "google/protobuf/timestamp.proto", "google/protobuf/empty.proto"},
		MessageType: []*descriptorpb.DescriptorProto{
			scaleMessage("Thing", []*descriptorpb.FieldDescriptorProto{
				scaleField("id", 1, tString, "", false),
				scaleField("item", 2, tMessage, c+".Item", false),
				scaleField("updated", 3, tMessage, ".google.protobuf.Timestamp", false),
				scaleField("changes", 4, tMessage, p+".Thing.Change", true),
				scaleField("level", 5, tEnum, c+".Level", false),
			},
				scaleMessage("Change", []*descriptorpb.FieldDescriptorProto{
					scaleField("field", 1, tString, "", false),
					scaleField("before", 2, tString, "", false),
					scaleField("after", 3, tString, "", false),
				})),
			scaleMessage("UpdateThingRequest", []*descriptorpb.FieldDescriptorProto{
				scaleField("thing", 1, tMessage, p+".Thing", false),
				scaleField("update_mask", 2, tString, "", true),
			}),
			scaleMessage("BatchGetRequest", []*descriptorpb.FieldDescriptorProto{
				scaleField("ids", 1, tString, "", true),
			}),
			scaleMessage("CountResponse", []*descriptorpb.FieldDescriptorProto{
				scaleField("count", 1, tInt64, "", false),
			}),
		},
		Service: []*descriptorpb.ServiceDescriptorProto{sd},
	}
}

// scaleFiles builds the descriptors of the large backend into a private
// registry: the well-known types, the common file and 200 service files.
func scaleFiles(tb testing.TB) *protoregistry.Files {
	tb.Helper()
	files := new(protoregistry.Files)
	if err := files.RegisterFile(timestamppb.File_google_protobuf_timestamp_proto); err != nil {
		tb.Fatal(err)
	}
	if err := files.RegisterFile(emptypb.File_google_protobuf_empty_proto); err != nil {
		tb.Fatal(err)
	}
	add := func(fdp *descriptorpb.FileDescriptorProto) {
		fd, err := protodesc.NewFile(fdp, files)
		if err != nil {
			tb.Fatalf("%s: %v", fdp.GetName(), err)
		}
		if err := files.RegisterFile(fd); err != nil {
			tb.Fatal(err)
		}
	}
	add(scaleCommon())
	for i := range scaleServices {
		add(scaleServiceFile(i))
	}
	return files
}

// scaleHandler answers every call with an empty message, which decodes as
// any response type with no field set.
func scaleHandler(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var in emptypb.Empty // keeps the request's fields as unknown ones
	if err := dec(&in); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// scaleBackend serves the large backend on loopback TCP, with reflection
// v1 and v1alpha answering from its private registry, and returns a client
// connection to it. Everything stops when tb ends.
func scaleBackend(tb testing.TB) *grpc.ClientConn {
	tb.Helper()
	files := scaleFiles(tb)
	return testserver.Start(tb, testserver.Options{Addr: testserver.Loopback, Reflection: testserver.ReflectionNone,
		Services: []testserver.Service{func(gs *grpc.Server) {
			for i := range scaleServices {
				pkg, svc := scaleServiceName(i)
				sd := &grpc.ServiceDesc{ServiceName: pkg + "." + svc, HandlerType: (*any)(nil)}
				for _, m := range scaleMethods {
					sd.Methods = append(sd.Methods, grpc.MethodDesc{MethodName: m[0], Handler: scaleHandler})
				}
				gs.RegisterService(sd, nil)
			}
			opts := reflection.ServerOptions{Services: gs, DescriptorResolver: files, ExtensionResolver: new(protoregistry.Types)}
			grpc_reflection_v1.RegisterServerReflectionServer(gs, reflection.NewServerV1(opts))
			grpc_reflection_v1alpha.RegisterServerReflectionServer(gs, reflection.NewServer(opts))
		}}}).Conn()
}

// call makes one JSON-RPC call through srv and returns the reply.
func call(ctx context.Context, srv *bridge.Server, method, params string) string {
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	return string(srv.Handle(ctx, []byte(body), nil))
}

// TestScaleDiscover checks the setup of BenchmarkDiscoverLarge: after
// discovery every one of the 2,000 methods has its JSON-RPC name, and a
// real call through the bridge reaches a method of each of the 200
// services. It is not timed.
func TestScaleDiscover(t *testing.T) {
	conn := scaleBackend(t)
	reg, err := bridgereflect.Discover(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(reg.Services()); n != scaleServices {
		t.Errorf("discovered %d services, want %d", n, scaleServices)
	}
	names := make(map[string]bool)
	for _, md := range reg.Methods() {
		names[mapping.MethodName(md)] = true
	}
	if len(names) != scaleServices*scaleMethodsPerService {
		t.Errorf("discovered %d methods, want %d", len(names), scaleServices*scaleMethodsPerService)
	}
	for i := range scaleServices {
		pkg, svc := scaleServiceName(i)
		for _, m := range scaleMethods {
			if name := pkg + "." + svc + "." + m[0]; !names[name] {
				t.Fatalf("method %s not discovered", name)
			}
		}
	}

	srv := bridge.New(conn, bridge.Options{})
	srv.Update(reg)
	for i := range scaleServices {
		pkg, svc := scaleServiceName(i)
		m := scaleMethods[i%scaleMethodsPerService]
		method := pkg + "." + svc + "." + m[0]
		got := call(t.Context(), srv, method, `{}`)
		if !strings.Contains(got, `"result"`) || strings.Contains(got, `"error"`) {
			t.Fatalf("%s: got %s", method, got)
		}
	}
	// A request whose params reach the backend: the nested message, the
	// map and the enum of the shared file are transcoded.
	got := call(t.Context(), srv, "scale.svc199.v1.Service199.UpdateThing",
		`{"thing":{"id":"a","item":{"name":"n","level":"LEVEL_HIGH","attrs":[{"key":"k","value":"v"}],"labels":{"x":"y"},"created":"2024-01-01T00:00:00Z"},"changes":[{"field":"f"}]},"updateMask":["item"]}`)
	if got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("UpdateThing: got %s", got)
	}
	doc := call(t.Context(), srv, "rpc.discover", `[]`)
	if !strings.Contains(doc, `"scale.svc123.v1.Service123.TouchThing"`) {
		t.Fatalf("rpc.discover lacks scale.svc123.v1.Service123.TouchThing: %.200s", doc)
	}
}

// heapAfterGC is the live heap after two full collections.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkDiscoverLarge is goal 5: one op is a discovery of the 200
// services and 2,000 methods by server reflection over loopback and the
// bridge's preparation of them (bridge.Server.Update: per-method handles
// and the OpenRPC document), as serve does at start. Besides ns/op it
// reports ms/op, the two parts apart, and the live heap of one result:
// registry-B is the discovered registry alone, served-B the registry with
// the bridge's table on top; openrpc-B is the size of the OpenRPC document
// rpc.discover answers (a JSON-RPC reply around it), openrpc-compact-B the
// same without indentation.
func BenchmarkDiscoverLarge(b *testing.B) {
	conn := scaleBackend(b)
	ctx := b.Context()

	// The memory of one result, measured before the timed loop so that
	// nothing from it is garbage yet.
	if _, err := bridgereflect.Discover(ctx, conn); err != nil { // warms the connection
		b.Fatal(err)
	}
	base := heapAfterGC()
	reg, err := bridgereflect.Discover(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	afterReg := heapAfterGC()
	srv := bridge.New(conn, bridge.Options{})
	srv.Update(reg)
	afterSrv := heapAfterGC()
	if n := len(reg.Methods()); n != scaleServices*scaleMethodsPerService {
		b.Fatalf("discovered %d methods", n)
	}
	doc := call(ctx, srv, "rpc.discover", `[]`)
	runtime.KeepAlive(reg)
	runtime.KeepAlive(srv)

	var discover, update time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		r, err := bridgereflect.Discover(ctx, conn)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s := bridge.New(conn, bridge.Options{})
		s.Update(r)
		discover += t1.Sub(t0)
		update += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(discover+update)/n/1e6, "ms/op")
	b.ReportMetric(float64(discover)/n/1e6, "discover-ms/op")
	b.ReportMetric(float64(update)/n/1e6, "update-ms/op")
	b.ReportMetric(float64(int64(afterReg)-int64(base)), "registry-B")
	b.ReportMetric(float64(int64(afterSrv)-int64(base)), "served-B")
	b.ReportMetric(float64(len(doc)), "openrpc-B")
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(doc)); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(compact.Len()), "openrpc-compact-B")
}
