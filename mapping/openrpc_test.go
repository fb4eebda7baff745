package mapping_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

var update = flag.Bool("update", false, "rewrite testdata/openrpc/*.golden.json")

func TestDocumentValidatesAgainstMetaSchema(t *testing.T) {
	meta := metaSchema(t)
	files := protosetFiles(t)
	tests := []struct {
		name     string
		services []string
		opts     mapping.DocumentOptions
	}{
		{"demo", []string{"demo.v1.Notes"}, mapping.DocumentOptions{Info: demoInfo}},
		{"every service", []string{"demo.v1.Notes", "helloworld.Greeter", "rpc.ops.Ops", "test.v1.TestService"}, mapping.DocumentOptions{}},
		{"emit unpopulated", []string{"test.v1.TestService"}, mapping.DocumentOptions{EmitUnpopulated: true}},
		{"no methods", nil, mapping.DocumentOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := document(t, serviceMethods(t, files, tt.services...), tt.opts)
			if err := meta.Validate(unmarshalJSON(t, doc)); err != nil {
				t.Errorf("document does not validate against the OpenRPC meta-schema: %v", err)
			}
		})
	}
}

// The meta-schema test must be able to fail.
func TestMetaSchemaRejectsBrokenDocuments(t *testing.T) {
	meta := metaSchema(t)
	doc := document(t, serviceMethods(t, protosetFiles(t), "demo.v1.Notes"), mapping.DocumentOptions{})
	tests := []struct {
		name   string
		mutate func(map[string]any)
	}{
		{"wrong version", func(d map[string]any) { d["openrpc"] = "9.9.9" }},
		{"no info", func(d map[string]any) { delete(d, "info") }},
		{"method without params", func(d map[string]any) { delete(d["methods"].([]any)[0].(map[string]any), "params") }},
		{"bad paramStructure", func(d map[string]any) { d["methods"].([]any)[0].(map[string]any)["paramStructure"] = "named" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(doc, &d); err != nil {
				t.Fatal(err)
			}
			tt.mutate(d)
			b, _ := json.Marshal(d)
			if err := meta.Validate(unmarshalJSON(t, b)); err == nil {
				t.Error("broken document validates, want an error")
			}
		})
	}
}

func TestDemoDocumentGolden(t *testing.T) {
	got := document(t, serviceMethods(t, protosetFiles(t), "demo.v1.Notes"), mapping.DocumentOptions{Info: demoInfo})
	path := filepath.Join("testdata", "openrpc", "demo.golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./mapping -run TestDemoDocumentGolden -update)", err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("demo document differs from %s; if the change is intended, rerun with -update\ngot:\n%s", path, got)
	}
}

func TestDocumentIsDeterministic(t *testing.T) {
	files := protosetFiles(t)
	mds := serviceMethods(t, files, "test.v1.TestService", "demo.v1.Notes", "rpc.ops.Ops", "helloworld.Greeter")
	first := document(t, mds, mapping.DocumentOptions{})
	slices.Reverse(mds)
	for range 5 {
		if got := document(t, mds, mapping.DocumentOptions{}); !bytes.Equal(got, first) {
			t.Fatalf("two documents of the same methods differ:\n%s\n%s", got, first)
		}
	}
	var doc struct {
		Methods []struct{ Name string } `json:"methods"`
	}
	if err := json.Unmarshal(first, &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range doc.Methods {
		names = append(names, m.Name)
	}
	if !slices.IsSorted(names) {
		t.Errorf("methods %v are not sorted", names)
	}
}

// parsedDoc is the part of a document the tests look into.
type parsedDoc struct {
	Info    map[string]any `json:"info"`
	Servers []any          `json:"servers"`
	Methods []struct {
		Name           string `json:"name"`
		Summary        string `json:"summary"`
		Description    string `json:"description"`
		ParamStructure string `json:"paramStructure"`
		Deprecated     bool   `json:"deprecated"`
		Params         []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Required    bool           `json:"required"`
			Schema      map[string]any `json:"schema"`
		} `json:"params"`
		Result struct {
			Name   string         `json:"name"`
			Schema map[string]any `json:"schema"`
		} `json:"result"`
		Errors    []map[string]any `json:"errors"`
		Streaming *struct {
			Kind            string         `json:"kind"`
			ClientStreaming bool           `json:"clientStreaming"`
			ServerStreaming bool           `json:"serverStreaming"`
			Request         map[string]any `json:"request"`
			Response        map[string]any `json:"response"`
			HTTP            streamWay      `json:"http"`
			HTTPLive        *streamWay     `json:"httpLive"`
			WebSocket       streamWay      `json:"websocket"`
		} `json:"x-grpc-streaming"`
	} `json:"methods"`
	Components struct {
		Schemas map[string]map[string]any `json:"schemas"`
		Errors  map[string]struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	} `json:"components"`
	Streaming []string `json:"x-streaming-methods"`
}

// streamWay is how a streaming call goes over one transport.
type streamWay struct {
	Description    string         `json:"description"`
	ParamsOptional bool           `json:"paramsOptional"`
	Params         map[string]any `json:"params"`
	Result         map[string]any `json:"result"`
	Notifications  []struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	} `json:"notifications"`
	Methods []string `json:"methods"`
	Accept  []string `json:"accept"`
}

func parseDoc(t testing.TB, b []byte) parsedDoc {
	t.Helper()
	var d parsedDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDocumentMethods(t *testing.T) {
	files := protosetFiles(t)
	d := parseDoc(t, document(t, serviceMethods(t, files, "demo.v1.Notes", "rpc.ops.Ops", "test.v1.TestService"), mapping.DocumentOptions{}))
	byName := map[string]int{}
	for i, m := range d.Methods {
		byName[m.Name] = i
		// unary and server streaming: the one request message by name or by position
		wantStructure := "either"
		if x := m.Streaming; x != nil && x.ClientStreaming {
			wantStructure = "by-position" // params are the array of request messages
		}
		if m.ParamStructure != wantStructure {
			t.Errorf("%s: paramStructure = %q, want %s", m.Name, m.ParamStructure, wantStructure)
		}
		var codes []int
		for i, e := range m.Errors {
			ref, isRef := e["$ref"].(string)
			if !isRef && i == 0 {
				codes = append(codes, int(e["code"].(float64))) // the method's own -32602 example
				continue
			}
			key := strings.TrimPrefix(ref, "#/components/errors/")
			c, ok := d.Components.Errors[key]
			if !ok {
				t.Errorf("%s: error %v is not in components.errors", m.Name, e)
			}
			codes = append(codes, c.Code)
		}
		want := []int{-32602, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
		if !slices.Equal(codes, want) {
			t.Errorf("%s: error codes %v, want %v", m.Name, codes, want)
		}
	}
	if _, ok := byName[".rpc.ops.Ops.Ping"]; !ok {
		t.Errorf("methods %v: want .rpc.ops.Ops.Ping (the leading-dot name the bridge serves)", byName)
	}
	create := d.Methods[byName["demo.v1.Notes.CreateNote"]]
	if create.Summary != "CreateNote stores a note and returns it with its id and creation time." {
		t.Errorf("CreateNote summary = %q, want its comment's first sentence", create.Summary)
	}
	if !strings.Contains(create.Description, "google.rpc.BadRequest detail") {
		t.Errorf("CreateNote description = %q, want its whole comment", create.Description)
	}
	if got := create.Result.Schema["$ref"]; got != "#/components/schemas/demo.v1.Note" {
		t.Errorf("CreateNote result schema = %v, want $ref to demo.v1.Note", create.Result.Schema)
	}
	if old := d.Methods[byName["test.v1.TestService.Old"]]; !old.Deprecated {
		t.Error("test.v1.TestService.Old: deprecated is false, want true")
	}
	if echo := d.Methods[byName["test.v1.TestService.Echo"]]; echo.Deprecated {
		t.Error("test.v1.TestService.Echo: deprecated is true, want false")
	}
	echo := d.Methods[byName["test.v1.TestService.Echo"]]
	if len(echo.Params) != 42 {
		t.Errorf("Echo has %d params, want one per field of test.v1.AllTypes (42)", len(echo.Params))
	}
	for _, p := range echo.Params {
		switch p.Name {
		case "fInt64":
			if !strings.Contains(p.Description, "f_int64") {
				t.Errorf("param fInt64: description %q does not mention the proto name", p.Description)
			}
		case "f_int64":
			t.Error("param named by proto name f_int64, want the JSON name fInt64")
		case "oString":
			if !strings.Contains(p.Description, "oneof choice") {
				t.Errorf("param oString: description %q does not mention its oneof", p.Description)
			}
		}
	}
	if d.Info["title"] != mapping.DefaultTitle || d.Info["version"] != mapping.DefaultVersion {
		t.Errorf("info = %v, want the default title and version", d.Info)
	}
	if d.Servers != nil {
		t.Errorf("servers = %v, want none without configuration", d.Servers)
	}
}

func TestDocumentInfo(t *testing.T) {
	mds := serviceMethods(t, protosetFiles(t), "demo.v1.Notes")
	d := parseDoc(t, document(t, mds, mapping.DocumentOptions{Info: mapping.DocumentInfo{
		Title: "Notes", Version: "2.1.0", Description: "The notes API.",
		Servers: []mapping.Server{{URL: "https://notes.example/rpc"}},
	}}))
	want := map[string]any{"title": "Notes", "version": "2.1.0", "description": "The notes API."}
	if !reflect.DeepEqual(d.Info, want) {
		t.Errorf("info = %v, want %v", d.Info, want)
	}
	if len(d.Servers) != 1 || d.Servers[0].(map[string]any)["url"] != "https://notes.example/rpc" {
		t.Errorf("servers = %v, want the one configured", d.Servers)
	}
	// Without a description, the services' comments stand in.
	d = parseDoc(t, document(t, mds, mapping.DocumentOptions{}))
	if got := d.Info["description"]; got != "demo.v1.Notes: Notes keeps notes in memory." {
		t.Errorf("default description = %q, want the service comment", got)
	}
}

func TestMethodName(t *testing.T) {
	files := protosetFiles(t)
	tests := []struct{ method, want string }{
		{"demo.v1.Notes.GetNote", "demo.v1.Notes.GetNote"},
		{"rpc.ops.Ops.Ping", ".rpc.ops.Ops.Ping"},
		{"helloworld.Greeter.SayHello", "helloworld.Greeter.SayHello"},
	}
	for _, tt := range tests {
		d, err := files.FindDescriptorByName(protoreflect.FullName(tt.method))
		if err != nil {
			t.Fatal(err)
		}
		if got := mapping.MethodName(d.(protoreflect.MethodDescriptor)); got != tt.want {
			t.Errorf("MethodName(%s) = %q, want %q", tt.method, got, tt.want)
		}
	}
}

// handMadeFile builds a proto2 file with a streaming method, a required
// field and a field marked REQUIRED by google.api.field_behavior (extension
// 1052 of FieldOptions, here as unknown bytes as a descriptor set carries
// it when google/api/field_behavior.proto is not linked in).
func handMadeFile(t testing.TB) protoreflect.FileDescriptor {
	t.Helper()
	behavior := &descriptorpb.FieldOptions{}
	var raw []byte
	raw = protowire.AppendTag(raw, 1052, protowire.BytesType)
	raw = protowire.AppendBytes(raw, []byte{1, 2}) // packed [OPTIONAL, REQUIRED]
	behavior.ProtoReflect().SetUnknown(raw)
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("hand/made.proto"),
		Package: proto.String("hand"),
		Syntax:  proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Req"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("must"), Number: proto.Int32(1), Label: descriptorpb.FieldDescriptorProto_LABEL_REQUIRED.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), JsonName: proto.String("must")},
				{Name: proto.String("should_be"), Number: proto.Int32(2), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), JsonName: proto.String("shouldBe"), Options: behavior},
				{Name: proto.String("may"), Number: proto.Int32(3), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), JsonName: proto.String("may")},
			},
		}},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Svc"),
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: proto.String("Unary"), InputType: proto.String(".hand.Req"), OutputType: proto.String(".hand.Req")},
				{Name: proto.String("Watch"), InputType: proto.String(".hand.Req"), OutputType: proto.String(".hand.Req"), ServerStreaming: proto.Bool(true)},
			},
		}},
	}
	fd, err := protodesc.NewFile(fdp, new(protoregistry.Files))
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestRequiredFieldsAndStreaming(t *testing.T) {
	fd := handMadeFile(t)
	sd := fd.Services().Get(0)
	mds := []protoreflect.MethodDescriptor{sd.Methods().Get(0), sd.Methods().Get(1)}
	doc := document(t, mds, mapping.DocumentOptions{})
	if err := metaSchema(t).Validate(unmarshalJSON(t, doc)); err != nil {
		t.Errorf("document does not validate against the meta-schema: %v", err)
	}
	d := parseDoc(t, doc)
	if len(d.Methods) != 2 || d.Methods[0].Name != "hand.Svc.Unary" || d.Methods[1].Name != "hand.Svc.Watch" {
		t.Fatalf("methods = %+v, want hand.Svc.Unary and hand.Svc.Watch", d.Methods)
	}
	if d.Methods[0].Streaming != nil {
		t.Errorf("hand.Svc.Unary has x-grpc-streaming %+v, want none", d.Methods[0].Streaming)
	}
	if x := d.Methods[1].Streaming; x == nil || x.Kind != mapping.KindServerStreaming {
		t.Errorf("hand.Svc.Watch x-grpc-streaming = %+v, want kind %s", x, mapping.KindServerStreaming)
	}
	if !slices.Equal(d.Streaming, []string{"hand.Svc.Watch"}) {
		t.Errorf("x-streaming-methods = %v, want [hand.Svc.Watch]", d.Streaming)
	}
	required := map[string]bool{}
	for _, p := range d.Methods[0].Params {
		required[p.Name] = p.Required
	}
	want := map[string]bool{"must": true, "shouldBe": true, "may": false}
	if !reflect.DeepEqual(required, want) {
		t.Errorf("params required = %v, want %v", required, want)
	}
	if got := d.Components.Schemas["hand.Req-input"]["required"]; !reflect.DeepEqual(got, []any{"must", "shouldBe"}) {
		t.Errorf("hand.Req-input required = %v, want [must shouldBe]", got)
	}
	if got := d.Components.Schemas["hand.Req"]["required"]; !reflect.DeepEqual(got, []any{"must"}) {
		t.Errorf("hand.Req required = %v, want [must] (field_behavior is not enforced on results)", got)
	}
	s := newDocSchemas(t, doc)
	in := s.component("hand.Req-input")
	for _, tt := range []struct {
		params string
		ok     bool
	}{
		{`{"must": "a", "shouldBe": "b"}`, true},
		{`{"must": "a", "should_be": "b"}`, false}, // REQUIRED is named by JSON name
		{`{"shouldBe": "b"}`, false},
		{`{"must": null, "shouldBe": "b"}`, false},
	} {
		err := in.Validate(unmarshalJSON(t, []byte(tt.params)))
		if (err == nil) != tt.ok {
			t.Errorf("params %s: valid = %v, want %v (%v)", tt.params, err == nil, tt.ok, err)
		}
	}
}

func TestIsFieldRequired(t *testing.T) {
	req := handMadeFile(t).Messages().ByName("Req")
	for _, tt := range []struct {
		field string
		want  bool
	}{{"must", true}, {"should_be", true}, {"may", false}} {
		if got := mapping.IsFieldRequired(req.Fields().ByName(protoreflect.Name(tt.field))); got != tt.want {
			t.Errorf("IsFieldRequired(%s) = %v, want %v", tt.field, got, tt.want)
		}
	}
}
