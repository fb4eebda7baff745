package mapping_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// TestPositionIsDocumentOrder: element i of params by position is the
// i-th param the OpenRPC document lists, which is the i-th field in the
// order the .proto file declares them (not the order of their numbers;
// each member of a oneof its own), for unary and server-streaming methods.
// It also holds for every method of the test services.
func TestPositionIsDocumentOrder(t *testing.T) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"order.proto": `
syntax = "proto3";
package order;
message R {
  string zulu = 9;
  string alpha = 1;
  oneof pick {
    int32 one = 4;
    string two = 3;
  }
  repeated string tags = 2;
}
service S {
  rpc Unary(R) returns (R);
  rpc Watch(R) returns (stream R);
}`}),
	})}
	files, err := c.Compile(context.Background(), "order.proto")
	if err != nil {
		t.Fatal(err)
	}
	svc := files[0].Services().Get(0)
	methods := []protoreflect.MethodDescriptor{svc.Methods().Get(0), svc.Methods().Get(1)}
	want := []string{"zulu", "alpha", "one", "two", "tags"}
	if got := documentParams(t, methods)["order.S.Unary"]; !slices.Equal(got, want) {
		t.Errorf("Unary params %v, want %v", got, want)
	}
	if got := documentParams(t, methods)["order.S.Watch"]; !slices.Equal(got, want) {
		t.Errorf("Watch params %v, want %v", got, want)
	}
	for _, md := range methods {
		codec := mapping.NewCodec(md, nil, mapping.Options{})
		got, e := codec.Request([]byte(`["z", "a", null, "2", ["t"]]`))
		if e != nil {
			t.Fatalf("%s: %v", md.Name(), e)
		}
		byName, e := codec.Request([]byte(`{"zulu": "z", "alpha": "a", "two": "2", "tags": ["t"]}`))
		if e != nil {
			t.Fatal(e)
		}
		if !proto.Equal(got, byName) {
			t.Errorf("%s: by position made %v, want %v", md.Name(), got, byName)
		}
	}

	// Every unary and server-streaming method of the test services.
	all := serviceMethods(t, protosetFiles(t), "demo.v1.Notes", "helloworld.Greeter", "rpc.ops.Ops", "test.v1.TestService")
	params := documentParams(t, all)
	for _, md := range all {
		if md.IsStreamingClient() {
			continue
		}
		fields := md.Input().Fields()
		var names []string
		for i := range fields.Len() {
			names = append(names, fields.Get(i).JSONName())
		}
		if got := params[mapping.MethodName(md)]; !slices.Equal(got, names) {
			t.Errorf("%s: params %v, want the fields in declaration order %v", md.FullName(), got, names)
		}
	}
}

// documentParams returns the names of each method's params, in order, in
// the OpenRPC document of methods.
func documentParams(t *testing.T, methods []protoreflect.MethodDescriptor) map[string][]string {
	t.Helper()
	var d struct {
		Methods []struct {
			Name   string `json:"name"`
			Params []struct {
				Name string `json:"name"`
			} `json:"params"`
		} `json:"methods"`
	}
	if err := json.Unmarshal(document(t, methods, mapping.DocumentOptions{}), &d); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range d.Methods {
		names := []string{}
		for _, p := range m.Params {
			names = append(names, p.Name)
		}
		out[m.Name] = names
	}
	return out
}
